# tests/cuda/train_check.cmake: runs `brrr train` on DEVICE for STEPS steps of a small config
# on DATA (the corpus in the shared folder, which need not sit beside the checkout) and checks
# the last logged training loss is below MAX_LOSS. Prints "final loss ok".
file(REMOVE_RECURSE ${OUT})
set(args train --preset cpu-tiny --device ${DEVICE} --max_iters ${STEPS} --eval_interval ${STEPS} --eval_iters 1
    --sample_tokens 40 --out_dir ${OUT} --data ${DATA})
if(DEVICE STREQUAL "emulator")
  list(APPEND args --batch_size 2 --block_size 16 --n_layer 1 --n_embd 32 --n_head 2)
endif()
execute_process(COMMAND ${BRRR} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "brrr train --device ${DEVICE} failed (exit ${rc})")
endif()
file(STRINGS ${OUT}/log.jsonl lines REGEX "\"event\":\"step\"")
list(GET lines -1 last)
string(REGEX MATCH "\"loss\":([0-9.eE+-]+)" _ "${last}")
set(loss ${CMAKE_MATCH_1})
if(loss GREATER_EQUAL ${MAX_LOSS})
  message(FATAL_ERROR "final training loss ${loss} is not below ${MAX_LOSS}")
endif()
message("final loss ok: ${loss} < ${MAX_LOSS}")
