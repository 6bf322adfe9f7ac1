# Writes the tiny test models: a target, a draft that is the target plus noise (it agrees with
# the target often but not always), models with a different vocabulary, and recurrent (Mamba) and
# hybrid (LFM2: convolution, attention, convolution) models with the same vocabulary: each a target
# and its noisy draft, to pair with each other and with the attention models. Then the drafting
# heads: a target whose next token depends mostly on the current one (head-target), a GLM-4.5-style
# target with its MTP layer (mtp-target), a Qwen3.5-style hybrid one (qwen35-target, tools/tiny_qwen35.c),
# EAGLE-3, DFlash and DSpark drafts for head-target that
# agree with it often (tools/tiny_heads.c), and heads that do not fit it (a wrong hidden size,
# a target layer it lacks).
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
# The target's weights with a vocabulary that splits a few words otherwise: a draft of another
# vocabulary that still agrees with the target on most text (drafts through text).
make(split-vocab.gguf --seed 1 --vocab split --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
make(mamba-target.gguf --arch mamba --seed 1 --logit-scale ${SCALE})
make(mamba-draft.gguf --arch mamba --seed 1 --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
make(lfm2-target.gguf --arch lfm2 --n-layer 3 --seed 1 --logit-scale ${SCALE})
make(lfm2-draft.gguf --arch lfm2 --n-layer 3 --seed 1 --noise 0.1 --noise-seed 7 --logit-scale ${SCALE})
make(head-target.gguf --seed 3 --n-layer 3 --layer-scale 0.1 --logit-scale ${SCALE})
make(mtp-target.gguf --arch glm4moe --seed 3 --n-layer 2 --layer-scale 0.1 --hidden-mix 0.25 --logit-scale ${SCALE})
# A Qwen3.5-style hybrid target (delta-net, attention, delta-net, attention) with its MTP layer.
make(qwen35-target.gguf --arch qwen35 --seed 6 --n-layer 4 --layer-scale 0.1 --hidden-mix 0.25 --logit-scale ${SCALE})
# Targets with two nextn layers (DeepSeek-V3 style counts), which the pinned llama.cpp's graphs of
# these architectures cannot run.
make(mtp2-target.gguf --arch glm4moe --seed 3 --n-layer 2 --layer-scale 0.1 --nextn-layers 2 --logit-scale ${SCALE})
make(qwen35-mtp2-target.gguf --arch qwen35 --seed 6 --n-layer 2 --layer-scale 0.1 --nextn-layers 2
  --logit-scale ${SCALE})
make(eagle3.gguf --arch eagle3 --target ${OUT}/head-target.gguf --target-layers 0,1,2 --seed 5 --hidden-mix 0.2
  --layer-scale 0.1)
make(dflash.gguf --arch dflash --target ${OUT}/head-target.gguf --target-layers 1,2 --seed 6 --n-layer 1
  --hidden-mix 0.2)
make(dspark.gguf --arch dspark --target ${OUT}/head-target.gguf --target-layers 1,2 --seed 6 --n-layer 1
  --hidden-mix 0.2)
make(eagle3-wide.gguf --arch eagle3 --target ${OUT}/head-target.gguf --target-layers 0,1,2 --seed 5
  --target-hidden-size 48)
make(eagle3-deep.gguf --arch eagle3 --target ${OUT}/head-target.gguf --target-layers 0,1,9 --seed 5)
make(dflash-deep.gguf --arch dflash --target ${OUT}/head-target.gguf --target-layers 1,7 --seed 6 --n-layer 1)
make(eagle3-vocab.gguf --arch eagle3 --target ${OUT}/head-target.gguf --target-layers 0,1,2 --seed 5 --vocab different)
# Heads of 64 (n_embd 256, 4 heads): quantized KV caches need a head size that is a multiple of 32,
# and flash attention's tiled path only runs on such heads (test_invariance).
make(target-h64.gguf --seed 1 --n-embd 256 --n-head 4 --n-head-kv 4 --n-ff 256 --logit-scale ${SCALE})
# The same in Q8_0: a pass of one row takes the same product kernel as several (no padding needed).
make(target-h64-q8.gguf --seed 1 --n-embd 256 --n-head 4 --n-head-kv 4 --n-ff 256 --logit-scale ${SCALE}
     --weight-type q8_0)
make(draft-h64.gguf --seed 1 --n-embd 256 --n-head 4 --n-head-kv 4 --n-ff 256 --logit-scale ${SCALE}
     --noise 0.1 --noise-seed 7)
# A LoRA adapter for target.gguf (rank 4 on every layer's attn_q and ffn_up, and on output).
make(lora.gguf --seed 9 --lora-rank 4)
# Embeddings and rerank (issue 46): an embedding model that states mean pooling, a Qwen3-style
# reranker with its classifier head (rank pooling: cls.output, two labels), and the same reranker
# with a rerank template (tokenizer.chat_template.rerank) instead of BOS query doc.
make(embed.gguf --seed 11 --pooling mean)
make(rerank.gguf --arch qwen3 --seed 12 --pooling rank)
make(rerank-template.gguf --arch qwen3 --seed 12 --pooling rank --rerank-template "<s>query: {query}</s>document: {document}")
# A vision projector for target.gguf (tools/make_tiny_mmproj.c: LLaVA's mlp, 32x32 pixels in
# patches of 8, so an image is 16 embeddings): images through llama.cpp's mtmd.
execute_process(COMMAND ${MMPROJ_TOOL} --out ${OUT}/mmproj.gguf --target ${OUT}/target.gguf RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_tiny_mmproj failed")
endif()
# A projector that makes 4 positions of an image (patches of 16), for the draft: the draft's own
# projector must agree with the target's 16, so this one is refused per image (test_images).
execute_process(COMMAND ${MMPROJ_TOOL} --out ${OUT}/mmproj-patch16.gguf --target ${OUT}/draft.gguf --patch 16
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_tiny_mmproj failed")
endif()
