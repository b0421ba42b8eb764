# Helpers every test area may use (included by tests/CMakeLists.txt before the areas).

# tpgen_expect_error(TEST REGEX LABELS l... [NP n] [TIMEOUT s] [FIXTURE f] [DRIVER_FLAGS ...] ARGS tpgen args...):
# tpgen fails cleanly, one clear error matching REGEX, non-zero status, no hang, every rank exits
# (tests/errors/expect_error.sh). NP ranks under mpirun (default 2); NP 0 runs tpgen alone.
# Open MPI's mpirun waits 1 s before SIGKILL once a rank exits non-zero, although here every rank
# is already exiting on its own; OMPI_MCA_odls_base_sigkill_timeout=0 saves ~1.5 s a test (other
# MPIs ignore the variable).
function(tpgen_expect_error test regex)
  cmake_parse_arguments(E "" "NP;TIMEOUT;FIXTURE" "LABELS;ARGS;DRIVER_FLAGS" ${ARGN})
  if(NOT DEFINED E_NP)
    set(E_NP 2)
  endif()
  if(NOT DEFINED E_TIMEOUT)
    set(E_TIMEOUT 90)
  endif()
  set(launch)
  if(NOT E_NP EQUAL 0)
    set(launch ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np ${E_NP})
  endif()
  add_test(NAME ${test}
           COMMAND bash ${TPGEN_EXPECT_ERROR} ${E_DRIVER_FLAGS} ${regex} ${launch} $<TARGET_FILE:tpgen> ${E_ARGS})
  set_tests_properties(${test} PROPERTIES LABELS "${E_LABELS}" TIMEOUT ${E_TIMEOUT}
                       ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
  if(E_FIXTURE)
    set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED ${E_FIXTURE})
  endif()
endfunction()

# tpgen_serve_bad_flags(PREFIX LABELS "NAME|REGEX|FLAG~VALUE"...): `tpgen serve` on the tiny model
# (2 ranks) with each bad flag fails cleanly: tests PREFIX_NAME, 60 s each
function(tpgen_serve_bad_flags prefix labels)
  foreach(case ${ARGN})
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 name)
    list(GET parts 1 regex)
    list(GET parts 2 flags)
    string(REPLACE "~" ";" flags "${flags}")
    tpgen_expect_error(${prefix}_${name} ${regex} LABELS "${labels}" TIMEOUT 60
                       ARGS serve --model ${TPGEN_TEST_DATA}/tiny-f32 --backend cpu --threads 1 ${flags})
  endforeach()
endfunction()

# tpgen_parity_fixtures(VAR): the fixture directories under tests/data that hold an expected.json
function(tpgen_parity_fixtures var)
  file(GLOB dirs LIST_DIRECTORIES true ${TPGEN_TEST_DATA}/*)
  set(found)
  foreach(dir ${dirs})
    if(EXISTS ${dir}/expected.json)
      list(APPEND found ${dir})
    endif()
  endforeach()
  set(${var} ${found} PARENT_SCOPE)
endfunction()
