# The Copilot / FauxPilot drop-in (label copilot; also server): the token route the Copilot editor
# plugin calls, with and without --api-key, and the /v1/engines/{codegen,copilot-codex} routes
# through the openai client, curl and the plugin's own request body (tests/copilot/copilot_test.py).
foreach(part token engines)
  add_test(NAME copilot_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/copilot/copilot_test.py $<TARGET_FILE:tpgen>
                   ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py
                   ${CMAKE_CURRENT_BINARY_DIR}/copilot/${part} ${part})
  set_tests_properties(copilot_${part} PROPERTIES LABELS "copilot;server" TIMEOUT 120
                       FIXTURES_REQUIRED server_deps)
endforeach()
