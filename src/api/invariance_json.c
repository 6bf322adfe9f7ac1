/* invariance_json.c - see invariance_json.h. */
#include "invariance_json.h"

json_t *api_invariance_json(const specd_engine *engine) {
    specd_invariance_info inv = specd_engine_invariance(engine);
    return json_pack("{s:b, s:b, s:s?, s:s?}", "invariant", inv.invariant, "requested", inv.requested, "setting",
                     inv.setting, "note", inv.note);
}
