/* head_drafters.h - the drafter that runs the engine's drafting head (engine/head.h): 'mtp' and
 * 'eagle3' draw a chain one head decode per token, 'dflash' and 'dspark' read it from one pass
 * over a block (head_drafter.c). It drafts with the head the engine loaded; the drafter chain checks
 * that the head is the kind the request names. Owned by the caller (ops->destroy). */
#ifndef SPECD_HEAD_DRAFTERS_H
#define SPECD_HEAD_DRAFTERS_H

#include "drafter.h"

struct specd_engine;

specd_status specd_head_drafter_new(struct specd_engine *engine, specd_drafter *out, char **error);

#endif
