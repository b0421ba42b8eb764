# Layering (label layering): checkpoint/ (how weights are read) sits below engine/ (what every
# rank runs): it may include util/ and kernels/ (dtype.h) headers, never engine/ or anything
# above. The script resolves each quoted include as the compiler does and names the offending line.
add_test(NAME layering_checkpoint
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_includes.sh ${CMAKE_SOURCE_DIR} checkpoint util,kernels)
set_tests_properties(layering_checkpoint PROPERTIES LABELS layering TIMEOUT 30)
