/* head_drafters.h - the drafters that run a drafting head (engine/head.h): 'mtp' and 'eagle3' draw a
 * chain one head decode per token (head_chain.c), 'dflash' and 'dspark' read it from one pass over a
 * block (head_block.c). Each works on the engine's head as the engine loaded it; the drafter chain
 * checks that the head is the kind the request names. Owned by the caller (ops->destroy). */
#ifndef SPECD_HEAD_DRAFTERS_H
#define SPECD_HEAD_DRAFTERS_H

#include "drafter.h"

struct specd_engine;

specd_status specd_head_chain_new(struct specd_engine *engine, specd_drafter *out, char **error);
specd_status specd_head_block_new(struct specd_engine *engine, specd_drafter *out, char **error);

#endif
