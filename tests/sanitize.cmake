# Sanitizer canaries (label sanitize), only in a build configured with TPGEN_SANITIZE (see
# tools/dev/test-sanitize.sh): each runs a deliberate bug and passes only when the sanitizer reports
# it, so a sanitized suite that passes is known to have run with the checks on.
if(NOT TPGEN_SANITIZE)
  return()
endif()
add_executable(sanitize_canary ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/canary.c)
find_package(Threads REQUIRED)
target_link_libraries(sanitize_canary PRIVATE Threads::Threads)
set(canaries "overflow|3|AddressSanitizer: heap-buffer-overflow"
             "leak|3|LeakSanitizer: detected memory leaks"
             "misaligned|3|runtime error: store to misaligned address"
             "overflow_int|7|runtime error: signed integer overflow"
             "race|3|WARNING: ThreadSanitizer: data race")
foreach(c IN LISTS canaries)
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 kind)
  list(GET parts 1 arg)
  list(GET parts 2 regex)
  if(kind MATCHES "overflow$|leak" AND NOT TPGEN_SANITIZE MATCHES "address")
    continue()
  endif()
  if(kind MATCHES "misaligned|overflow_int" AND NOT TPGEN_SANITIZE MATCHES "undefined")
    continue()
  endif()
  if(kind STREQUAL "race" AND NOT TPGEN_SANITIZE MATCHES "thread")
    continue()
  endif()
  add_test(NAME sanitize_catches_${kind} COMMAND sanitize_canary ${kind} ${arg})
  set_tests_properties(sanitize_catches_${kind} PROPERTIES LABELS sanitize TIMEOUT 30
                       PASS_REGULAR_EXPRESSION "${regex}")
endforeach()

# Sanitized code runs several times slower (LeakSanitizer's exit check alone costs seconds per
# MPI process): every test's TIMEOUT is scaled once all test areas have been added, and every
# test gets TPGEN_TIMEOUT_SCALE in its environment for the bounds inside its scripts (a script
# that waits a fixed time for a command, a job or a server multiplies by it; 1 when unset).
set(TPGEN_SANITIZE_TIMEOUT_SCALE 4 CACHE STRING "Factor applied to test timeouts in a sanitizer build")
function(tpgen_scale_timeouts)
  get_property(all DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY TESTS)
  foreach(t IN LISTS all)
    get_test_property(${t} TIMEOUT to)
    if(to)
      math(EXPR to "${to} * ${TPGEN_SANITIZE_TIMEOUT_SCALE}")
      set_tests_properties(${t} PROPERTIES TIMEOUT ${to})
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT TPGEN_TIMEOUT_SCALE=${TPGEN_SANITIZE_TIMEOUT_SCALE})
  endforeach()
endfunction()
cmake_language(DEFER CALL tpgen_scale_timeouts)
