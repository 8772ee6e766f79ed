"""When block 1's previous-token head forms, against the drop of the later-copy loss and the
induction heads, read from a run's logged history rows (the same rows the Train page draws).

The sentence the Train page and the README say about the shipped 2-block run is built from this
(`onset_sentence`), so it follows the run it describes."""
from __future__ import annotations

from core.reading import CLEAR_SCORE
from core.training.transition import describe_curve

RISING = 0.1  # block 1's best previous-token score counts as rising from this value


def prev_head_onset(history: list[dict] | None, vocab_size: int) -> dict | None:
    """{rise, rise_prev, crossing (first logged step with a score >= RISING, the logged step before
    it, the first >= CLEAR_SCORE), drop_start, drop_end (core.training.transition.describe_curve),
    prev (step -> block 1's best previous-token score), induction (step -> the last block's best
    induction_any), loss (step -> later-copy loss)}, or None without two blocks, a drop or a crossing."""
    rows = [r for r in history or [] if r.get("prev_token") and len(r["prev_token"]) >= 2]
    if not rows:
        return None
    steps = [int(r["step"]) for r in rows]
    curve = describe_curve(steps, [r["loss_later_copies"] for r in rows], vocab_size)
    prev = {s: max(r["prev_token"][0]) for s, r in zip(steps, rows)}
    ind = {s: max(r["induction_any"][-1]) for s, r in zip(steps, rows) if r.get("induction_any")}
    rise = next((s for s in steps if prev[s] >= RISING), None)
    crossing = next((s for s in steps if prev[s] >= CLEAR_SCORE), None)
    if not curve["dropped"] or rise is None or crossing is None:
        return None
    before = [s for s in steps if s < rise]
    return {"rise": rise, "rise_prev": before[-1] if before else rise, "crossing": crossing,
            "drop_start": curve["drop_start"], "drop_end": curve["drop_end"], "prev": prev, "induction": ind,
            "loss": {s: r["loss_later_copies"] for s, r in zip(steps, rows)}}


def onset_sentence(history: list[dict] | None, vocab_size: int) -> str | None:
    """'Block 1's best previous-token score starts rising ... and crosses 0.5 during the drop', with the
    run's own numbers; None when prev_head_onset has nothing to say."""
    o = prev_head_onset(history, vocab_size)
    if o is None:
        return None
    p, ind, loss = o["prev"], o["induction"], o["loss"]
    r, r0, start, c = o["rise"], o["rise_prev"], o["drop_start"], o["crossing"]
    if r > start:
        when = f"only after the drop's start at step {start}"
    else:
        when = (f"between step {r0} ({p[r0]:.2f}) and step {r} ({p[r]:.2f}), {start - r} to {start - r0} steps before "
                f"the drop's start at step {start} ({p[start]:.2f}, later-copy loss still {loss[start]:.2f} nats)")
    last = len(history[0]["prev_token"]) if history and history[0].get("prev_token") else 2
    ahead = (f", ahead of the induction heads (best block-{last} induction score {ind[r]:.2f} at step {r})"
             if r in ind and ind[r] < RISING else "")
    where = ("during the drop" if start < c < o["drop_end"] else "before the drop" if c <= start else "after it")
    return (f"block 1's best previous-token score starts rising {when}{ahead}, and crosses {CLEAR_SCORE:g} "
            f"{where} ({p[c]:.2f} at step {c}, loss {loss[c]:.2f} nats)")
