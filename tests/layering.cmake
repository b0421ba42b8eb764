# Layering (label layering): each folder includes headers only from the folders below it
# (docs/ARCHITECTURE.md draws the tree). From the bottom:
#   util/ < kernels/ < comm/ ; engine/checkpoint/ and engine/tokenizer/ beside them ; engine/model/ (every rank) <
#   engine/sched/ (rank 0's scheduling) < launcher/server/ < launcher/
# The script resolves each quoted include of the folder's .c, .h and .cu files as the compiler
# does and names the offending line.
set(TPGEN_LAYERS
    "util:"
    "kernels:util"
    "comm:kernels,util"
    "engine/checkpoint:util,kernels"
    "engine/tokenizer:util"
    "engine/model:engine/checkpoint,comm,kernels,util"
    "engine/sched:engine/model,engine/tokenizer,comm,kernels,util"
    "launcher/server:engine/sched,engine/model,engine/tokenizer,engine/checkpoint,comm,kernels,util"
    "launcher:launcher/server,engine/sched,engine/model,engine/tokenizer,engine/checkpoint,comm,kernels,util")
set(TPGEN_LAYER_DIRS "")
foreach(layer ${TPGEN_LAYERS})
  string(REPLACE ":" ";" parts "${layer}")
  list(GET parts 0 dir)
  string(APPEND TPGEN_LAYER_DIRS ",${dir}")
endforeach()
foreach(layer ${TPGEN_LAYERS})
  string(REPLACE ":" ";" parts "${layer}")
  list(GET parts 0 dir)
  list(LENGTH parts n)
  set(allowed "")
  if(n GREATER 1)
    list(GET parts 1 allowed)
  endif()
  string(REPLACE "/" "_" name "${dir}")
  add_test(NAME layering_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_includes.sh ${CMAKE_SOURCE_DIR} ${dir} "${allowed}"
                   "${TPGEN_LAYER_DIRS}")
  set_tests_properties(layering_${name} PROPERTIES LABELS layering TIMEOUT 30)
endforeach()

# No two files use each other (label layering): every library's object files and the tpgen
# program's, and the CUDA module's when it is built; the script names both files and a symbol each
# way (tests/layering/check_cycles.sh).
set(TPGEN_CYCLE_INPUTS)
foreach(lib tpgen_util tpgen_kernels tpgen_comm tpgen_checkpoint tpgen_tokenizer tpgen_model tpgen_sched tpgen_server)
  list(APPEND TPGEN_CYCLE_INPUTS $<TARGET_FILE:${lib}>)
endforeach()
list(APPEND TPGEN_CYCLE_INPUTS $<TARGET_OBJECTS:tpgen>)
if(TARGET tpgen_cuda)
  list(APPEND TPGEN_CYCLE_INPUTS $<TARGET_OBJECTS:tpgen_cuda>)
endif()
add_test(NAME layering_no_mutual_files COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_cycles.sh ${TPGEN_CYCLE_INPUTS}
         COMMAND_EXPAND_LISTS)
set_tests_properties(layering_no_mutual_files PROPERTIES LABELS layering TIMEOUT 60)
