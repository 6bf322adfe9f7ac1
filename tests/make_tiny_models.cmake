# Writes the tiny test models: a target, a draft that is the target plus noise (it agrees with
# the target often but not always), a model with a different vocabulary, and recurrent (Mamba) and
# hybrid (LFM2: convolution, attention, convolution) models with the same vocabulary: each a target
# and its noisy draft, to pair with each other and with the attention models.
file(MAKE_DIRECTORY ${OUT})
function(make name)
  execute_process(COMMAND ${TOOL} --out ${OUT}/${name} ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "make_tiny_model failed for ${name}")
  endif()
endfunction()
make(target.gguf --seed 1 --logit-scale ${SCALE})
make(draft.gguf --seed 1 --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
make(other-vocab.gguf --seed 1 --vocab different --logit-scale ${SCALE})
make(mamba-target.gguf --arch mamba --seed 1 --logit-scale ${SCALE})
make(mamba-draft.gguf --arch mamba --seed 1 --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
make(lfm2-target.gguf --arch lfm2 --n-layer 3 --seed 1 --logit-scale ${SCALE})
make(lfm2-draft.gguf --arch lfm2 --n-layer 3 --seed 1 --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
