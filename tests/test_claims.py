"""Every sentence the lab shows that states a measured fact about the shipped checkpoints, measured
here on those checkpoints. One test per claim, named after the sentence it protects; the docstring
quotes it and says where it appears. Sentences whose numbers the page computes when it is drawn are
not here: they cannot go stale.

If a test here fails after the checkpoints are regenerated, the sentence it names is now false:
change the sentence (or make the page compute it), not the threshold."""
import dataclasses
import json

import pytest

from core.model.checkpoints import read_checkpoint
from core.reading.report import build_report
from core.reading.score_groups import GROUPS, head_roles, score_groups
from core.reading.score_terms import mean_induction_score_terms
from core.training.overview import initial_logit_bias
from core.training.presets import get_preset

from helpers import ROOT

CKPT = ROOT / "checkpoints"


def _shipped(name):
    path = CKPT / f"{name}.pt"
    if not path.is_file():
        pytest.fail(f"{path.name} is shipped with the repository")
    return read_checkpoint(path)


@pytest.fixture(scope="module")
def two_block():
    return _shipped("variable-period-2block")


@pytest.fixture(scope="module")
def two_block_report(two_block):
    model, info = two_block
    return build_report(model, info["task"])  # what `python -m core.report ... --json` prints


@pytest.fixture(scope="module")
def two_block_timeline(two_block):
    """core.training.timeline.timeline of the shipped 2-block file (the Train page's timeline), computed once."""
    from core.training.timeline import timeline

    return timeline(*two_block)


def _heads(report, layer):
    return [h for h in report["heads"] if h["layer"] == layer]


# ---- What the report of the shipped 2-block model must show -------------------------

def test_every_block2_head_copies_and_is_an_induction_head_and_block1_heads_are_not(two_block_report):
    """`python -m core.report checkpoints/variable-period-2block.pt --json`: every block-2 head has
    ov_copying_eig >= 0.5 and induction_any >= 0.85; every block-1 head induction_any < 0.2."""
    for h in _heads(two_block_report, 1):
        assert h["ov_copying_eig"] >= 0.5 and h["induction_any"] >= 0.85, h
    for h in _heads(two_block_report, 0):
        assert h["induction_any"] < 0.2, h


# ---- docs/DESIGN.md "Metrics" and the Home table ------------------------------------------------

def test_block2_heads_score_073_to_075_on_the_latest_copy_and_089_to_091_on_any_copy(two_block_report):
    """docs/DESIGN.md: "the block-2 heads score 0.73–0.75 on induction and 0.89–0.91 on
    induction_any"; the Home caption: "induction heads also read older copies"."""
    for h in _heads(two_block_report, 1):
        assert 0.725 <= h["induction"] <= 0.755 and 0.885 <= h["induction_any"] <= 0.915, h
        assert h["induction_any"] - h["induction"] > 0.1, h


def test_uncentred_eigen_score_hides_copying_head_2_2(two_block):
    """docs/DESIGN.md: "2.2 scores 0.22 uncentred and 0.75 centred (2.4: 0.58 and 0.89); the 1-block
    model's heads summed 0.234 and 0.862"."""
    from core.reading.copying import ov_copying_eig, ov_copying_matrix

    model, _ = two_block
    for head, plain, centred in ((1, 0.216, 0.747), (3, 0.577, 0.886)):
        C = ov_copying_matrix(model, 1, head)
        assert ov_copying_eig(C, centred=False) == pytest.approx(plain, abs=0.005)
        assert ov_copying_eig(C) == pytest.approx(centred, abs=0.005)
    one, _ = _shipped("variable-period-1block")
    C = ov_copying_matrix(one, 0, None)
    assert ov_copying_eig(C, centred=False) == pytest.approx(0.234, abs=0.005)
    assert ov_copying_eig(C) == pytest.approx(0.862, abs=0.005)


def test_on_the_effective_embedding_block2_heads_copy_almost_perfectly(two_block_report):
    """docs/DESIGN.md: "block 2: ov_copying_eig 0.74–0.89 on W_E, 0.999–1.000 on the effective
    embedding; ov_diag_top1 0.23–0.28 on W_E, 0.64–0.86 on the effective embedding"."""
    for h in _heads(two_block_report, 1):
        assert 0.735 <= h["ov_copying_eig"] <= 0.895 and h["ov_copying_eig_effective"] >= 0.9985, h
        assert 0.225 <= h["ov_diag_top1"] <= 0.285 and 0.635 <= h["ov_diag_top1_effective"] <= 0.865, h


def test_previous_token_head_1_4_attends_to_itself_under_2_percent(two_block_report):
    """docs/DESIGN.md (effective embedding): "the previous-token head 1.4 attends to itself 1.1 % of
    the time, so it adds almost nothing"; 1.1 and 1.3 attend to themselves."""
    block1 = {h["head"]: h for h in _heads(two_block_report, 0)}
    assert block1[3]["prev_token"] > 0.9 and 0.0105 <= block1[3]["self"] < 0.0115
    assert block1[0]["self"] > 0.99 and block1[2]["self"] > 0.99


def test_later_copies_floor_target_is_unknowable(two_block_report):
    """Home (later-copy loss help) and docs/DESIGN.md: "the second copy's first token ... no model can
    know it": the shipped 2-block model is near chance there while above 0.95 on later copies."""
    m = two_block_report["metrics"]
    assert m["acc_second_copy_first_token"] < 0.1 and m["acc_later_copies"] > 0.95


# ---- Depth page: "Why there" --------------------------------------------------------------------

def test_induction_query_comes_from_self_attending_heads_not_the_raw_token(two_block):
    """Depth page and README: the score split groups "raw-token query × key written by a block-1 head"
    (about 0: −0.20 to −0.02) and "query rewritten by a self-attending head × key written by a
    previous-token head" (5.4–6.1 of a margin near 10): the query side is Q-composition through
    1.1 and 1.3, the key side K-composition through 1.4."""
    model, info = two_block
    roles = head_roles(model, info["task"])
    assert roles == {"1.1": "self", "1.2": "other", "1.3": "self", "1.4": "previous"}
    for head in range(4):
        terms = mean_induction_score_terms(model, info["task"], 1, head, n_seqs=8, seed=0)
        g = score_groups(terms, roles)
        assert 9 < terms["total"] < 11
        assert -0.205 <= g[GROUPS[1]] < -0.015, g
        assert 5.35 <= g[GROUPS[2]] < 6.15, g


# ---- Train page, README, core/training/trainer.py: the initial embedding ---------------------------------

ONSET = ("block 1's best previous-token score starts rising between step 150 (0.06) and step 175 (0.20), "
         "25 to 50 steps before the drop's start at step 200 (0.33, later-copy loss still 3.64 nats), ahead of "
         "the induction heads (best block-2 induction score 0.06 at step 175), and crosses 0.5 during the drop "
         "(0.67 at step 225, loss 1.37 nats)")


def test_previous_token_head_starts_rising_before_the_drop_and_crosses_half_during_it(two_block):
    """Train page (embedding help, computed by core.training.onset.onset_sentence), README, docs/DESIGN.md,
    core.training.initial, bench/README (the head starts forming before the drop, not with it): ONSET above."""
    from core.training.onset import onset_sentence, prev_head_onset

    model, info = two_block
    assert onset_sentence(info["history"], model.cfg.vocab_size) == ONSET
    o = prev_head_onset(info["history"], model.cfg.vocab_size)
    assert o["rise"] < o["drop_start"] < o["crossing"] < o["drop_end"]
    assert o["loss"][o["drop_start"]] >= 3.0 and o["loss"][o["rise"]] >= 3.0
    flat = lambda text: " ".join(text.split())  # noqa: E731
    for doc in ("README.md", "docs/DESIGN.md"):
        assert ONSET in flat((ROOT / doc).read_text()), doc


def test_icl_score_positions_lie_in_the_first_and_a_later_copy_of_every_sequence(two_block, two_block_timeline):
    """Train page, timeline caption: "Olsson et al. take token 500 minus token 50; these
    are the scaled-down choice ... Position 10 is in the first copy of every sequence and 90 in a later
    copy of every one". Positions come from the run's period range, so a short range the Train page allows
    moves them (periods 4-8 in 24 tokens: 3 and 23)."""
    from core.training.timeline import icl_positions, icl_positions_hold

    task = two_block[1]["task"]
    t = two_block_timeline
    assert (t["early"], t["late"]) == (10, 90) and t["icl_holds"] == {"first": True, "later": True}
    assert icl_positions(task.seq_len, task.period_min, task.period_max) == (10, 90)
    assert icl_positions(24, 4, 8) == (3, 23) and icl_positions_hold(3, 23, 4, 8) == {"first": True, "later": True}
    assert icl_positions(96, 2, 64) == (1, 90) and icl_positions_hold(1, 90, 2, 64)["first"]


def test_before_the_drop_curve_sits_on_the_plateau_50_steps_before_the_drop(two_block_timeline):
    """Train page, loss by position (a step before the drop's start, which is already inside the fall): "at step 160,
    50 steps before the drop's start at step 210" (the snapshots' curve, at 10-step resolution)."""
    t = two_block_timeline
    b, a = t["before_after"]
    start = t["steps"].index(t["drop"]["drop_start"])
    assert t["steps"][b] == 160 and t["drop"]["drop_start"] == 210
    assert t["loss_later"][start] == pytest.approx(3.20, abs=0.01)
    assert t["loss_later"][b] == pytest.approx(3.94, abs=0.01) and t["steps"][a] == 280


def test_before_the_drop_the_loss_varies_with_position_by_less_than_the_drop_takes_off(two_block_timeline):
    """Train page, loss by position (positions do not cost about the same: before the
    drop positions 1-10 cost more than positions from 32 on). The caption gives both figures, computed
    (core.training.timeline position_change): on the shipped file 1.00 nats across positions at step 160,
    against 3.53 nats taken off on average at positions from 32 on by step 280."""
    t = two_block_timeline
    b, a = t["before_after"]
    before, after = t["loss_by_position"][b], t["loss_by_position"][a]
    pc = t["position_change"]
    assert pc["from_position"] == 32
    assert pc["spread_before"] == pytest.approx(float(before.max() - before.min()))
    assert pc["drop"] == pytest.approx(float((before[31:] - after[31:]).mean()))
    assert pc["spread_before"] == pytest.approx(1.00, abs=0.01) and pc["drop"] == pytest.approx(3.53, abs=0.01)
    assert pc["spread_before"] < pc["drop"] / 3 and before[:10].min() > before[31:].max()  # the early ones cost more
    assert t["icl"][b] == pytest.approx(-0.24, abs=0.01) and t["icl"][a] == pytest.approx(-4.02, abs=0.01)


@pytest.fixture(scope="module")
def causal_first_copy(two_block):
    from core.causal import experiments

    model, info = two_block
    return experiments.task_experiments(model, info["task"], 24, 32, 0, positions=True)


@pytest.fixture(scope="module")
def causal_resample(two_block):
    from core.causal import experiments

    model, info = two_block
    return experiments.task_experiments(model, info["task"], 24, 32, 0, positions=False, corruption="resample")


def _into_block2(res, path, direction):
    p = res.paths
    return p[(p["path"] == path) & (p["direction"] == direction) & (p["receiver_head"] < 0)].set_index("sender")


def test_causal_page_sentences_on_the_shipped_file(causal_first_copy, causal_resample):
    """Causal page at its defaults (period 24, 32 sequences, seed 0); the page computes each
    number, these pin them on the shipped file. Section 2: "Restoring positions 8-10 together gives 0.027;
    one of the L-1 second-copy targets is 0.043 of them". Section 4: denoising "the largest ... 0.090
    (value from 1.1), the lowest -0.173 (key from 1.4)"; "head 1.2 puts 0.92 of its attention two positions
    back, and noising its key path into block 2 leaves 0.65"; the most needed key path is 1.4's (0.35); the
    query rows cannot be tested under first-copy (each sender changes at under 10% of the query positions)
    and move under resample (1.4 0.79, 1.1 0.88)."""
    fc, rs = causal_first_copy, causal_resample
    assert fc.embedding_window["positions"] == [8, 9, 10]
    assert fc.embedding_window["effect"] == pytest.approx(0.027, abs=0.001)
    assert abs(fc.resid[0]).max() < 0.02
    den = _into_block2(fc, "v", "denoising")
    assert den.loc["1.1", "patch_effect"] == pytest.approx(0.090, abs=0.001)
    assert den.loc["1.3", "patch_effect"] == pytest.approx(0.087, abs=0.001)
    assert _into_block2(fc, "k", "denoising").loc["1.4", "patch_effect"] == pytest.approx(-0.173, abs=0.001)
    k = _into_block2(fc, "k", "noising")
    assert k.loc["1.2", "patch_effect"] == pytest.approx(0.647, abs=0.001)
    assert k.loc["1.4", "patch_effect"] == pytest.approx(0.348, abs=0.001)
    top = fc.offsets[fc.offsets["top"]].set_index("sender")
    assert top.loc["1.2", "offset"] == 2 and top.loc["1.2", "mass"] == pytest.approx(0.92, abs=0.005)
    assert fc.senders["at_queries"].max() < 0.1 and not fc.paths.query("path == 'q'")["testable"].any()
    q = _into_block2(rs, "q", "noising")
    assert q.loc["1.4", "patch_effect"] == pytest.approx(0.79, abs=0.01)
    assert q.loc["1.1", "patch_effect"] == pytest.approx(0.88, abs=0.01)
    assert rs.paths["testable"].all()


def test_shared_direction_adds_a_per_token_logit_bias_of_about_08_nats():
    """Train page, README, docs/DESIGN.md: the shared direction "is not free: a per-token logit bias
    whose standard deviation is about 0.8 nats at the start (0.009 with the plain start)", and the
    untrained model bets on a repeat of the current token."""
    p = get_preset("variable-period-2block")
    enlarged = initial_logit_bias(p.model, p.train)
    plain = initial_logit_bias(p.model, dataclasses.replace(p.train, embed_scale=1.0, embed_shared=0.0))
    assert 0.7 < enlarged["bias_std"] < 0.9 and plain["bias_std"] < 0.02
    assert enlarged["repeat_bet"] == 1.0 and plain["repeat_bet"] == 1.0


def test_transition_study_used_the_enlarged_start():
    """Train page (transition panel): "The study used the enlarged initial embedding"."""
    from core.training.transition import STUDY_FILE

    if not STUDY_FILE.is_file():
        pytest.fail("the transition study is not shipped")
    settings = next(l for l in STUDY_FILE.read_text().splitlines() if l.startswith("# settings:"))
    assert "'embed_scale': 3.0" in settings and "'embed_shared': 3.0" in settings


# ---- README: the transition study's reading -----------------------------------------------------

def test_readme_reading_of_the_transition_study_matches_the_csv():
    """README "The transition study": every count and range it gives is the shipped CSV's."""
    from core.training.transition import INDUCTION_HEAD, SHARP_PREV_TOKEN, STUDY_FILE, load_study, summarize

    if not STUDY_FILE.is_file():
        pytest.fail("the transition study is not shipped")
    runs = load_study()
    s = summarize(runs).set_index("blocks")
    text = " ".join((ROOT / "README.md").read_text().split())
    part = text[text.index("### The transition study"):]
    two, one = runs[runs.blocks == 2], runs[runs.blocks == 1]
    assert f"all {len(two)} two-block runs dropped" in part and s.loc[2, "dropped"] == len(two) == s.loc[2, "abrupt"]
    assert (f"The drop came at step {s.loc[2, 'drop_step_min']:.0f} to {s.loc[2, 'drop_step_max']:.0f} "
            f"(median {s.loc[2, 'drop_step_median']:.0f})") in part
    assert (f"for {two.drop_start.min():.0f} to {two.drop_start.max():.0f} steps, then fell from 3 nats to below 1 "
            f"nat within {two.width.min():.0f} to {two.width.max():.0f} steps") in part
    assert f"None of the {len(one)} one-block runs dropped" in part and s.loc[1, "dropped"] == 0
    lo, hi, med = one.final_loss_later.min(), one.final_loss_later.max(), one.final_loss_later.median()
    assert f"{lo:.2f} to {hi:.2f} nats (median {med:.2f})" in part
    assert (f"{int(s.loc[2, 'sharp_prev_token'])} of {len(two)} two-block runs had a block-1 head with "
            f"previous-token score at least {SHARP_PREV_TOKEN}") in part
    assert (f"{int(s.loc[2, 'two_induction_heads'])} of {len(two)} had at least two block-2 heads with "
            f"induction_any at least {INDUCTION_HEAD}") in part
    assert "in those 9 runs all four block-2 heads qualify" in part
    assert int(s.loc[2, "two_induction_heads"]) == 9 and (two[two.induction_heads >= 2].induction_heads == 4).all()
    seed4 = two.set_index("seed").loc[4]
    assert f"Seed 4's sharpest block-1 head reached only {seed4.prev_token_block1:.2f}" in part
    seed8 = two.set_index("seed").loc[8]
    assert seed8.induction_heads == 1
    assert (f"only one of its block-2 heads qualifies ({seed8.induction_any_max:.2f}; the next reaches "
            f"{seed8.induction_any_2nd:.2f}), and with that one head its loss still fell to "
            f"{seed8.final_loss_later:.2f} nats") in part


PLAIN_CURVE = ROOT / "tests" / "data" / "plain_start_curve.json"


def plateau_curve(scale: float, shared: float, steps: int | None = None, log_every: int = 10) -> dict:
    """Seed 0 of the default 2-block run from an initial embedding (scale, shared), one thread, logged
    every `log_every` steps until the later-copy loss is below LOW (or `steps` steps): the logged steps,
    loss_later_copies and block 1's best prev_token. PLAIN_CURVE holds plateau_curve(1.0, 0.0)
    (`PYTHONPATH=. python tests/test_claims.py` writes it again)."""
    import torch

    from core.training.trainer import Trainer
    from core.training.transition import LOW

    torch.set_num_threads(1)
    p = get_preset("variable-period-2block")
    train = dataclasses.replace(p.train, steps=1200, log_every=log_every, embed_scale=scale, embed_shared=shared)
    t = Trainer(p.model, p.task, train)
    while not t.done and t.history[-1]["loss_later_copies"] >= LOW and (steps is None or t.step < steps):
        t.run(log_every)
    return {"embed_scale": scale, "embed_shared": shared, "log_every": log_every,
            "step": [r["step"] for r in t.history],
            "loss_later_copies": [round(r["loss_later_copies"], 6) for r in t.history],
            "prev_token_block1": [round(max(r["prev_token"][0]), 6) for r in t.history]}


def _plateau(curve: dict) -> tuple[dict, int | None]:
    """describe_curve of a curve, and its first logged step where a block-1 head's prev_token reaches 0.5."""
    from core.training.transition import describe_curve

    d = describe_curve(curve["step"], curve["loss_later_copies"])
    return d, next((s for s, v in zip(curve["step"], curve["prev_token_block1"]) if v >= 0.5), None)


def _shipped_curve(info: dict) -> dict:
    h = info["history"]
    return {"step": [r["step"] for r in h], "loss_later_copies": [r["loss_later_copies"] for r in h],
            "prev_token_block1": [max(r["prev_token"][0]) for r in h]}


def test_enlarged_start_makes_the_plateau_about_three_times_shorter(two_block):
    """Train page (embedding help and transition panel), README, bench/README: "the plateau before the
    drop is about three times shorter than from the plain embedding" (seed 0: drop_start 200 vs 590),
    and the previous-token head reaches 0.5 only with the drop. Read from the stored curves: the shipped
    2-block run's history (the enlarged start) and PLAIN_CURVE (the plain start);
    test_the_stored_plateau_curves_are_what_training_gives checks that both are what the code trains."""
    _, info = two_block
    assert (info["train"]["embed_scale"], info["train"]["embed_shared"]) == (3.0, 3.0)
    plain = json.loads(PLAIN_CURVE.read_text())
    assert (plain["embed_scale"], plain["embed_shared"]) == (1.0, 0.0)
    starts = {}
    for name, curve in (("enlarged", _shipped_curve(info)), ("plain", plain)):
        d, formed = _plateau(curve)
        assert d["dropped"], name
        starts[name] = d["drop_start"]
        assert formed is None or formed >= d["drop_start"] - 50, (name, formed, d)
    assert starts == {"enlarged": 200, "plain": 590}
    assert 2.0 <= starts["plain"] / starts["enlarged"] <= 4.0, starts


@pytest.mark.slow
def test_the_stored_plateau_curves_are_what_training_gives(two_block):
    """The stored curves the plateau claim reads are today's code's: the first 50 steps of both runs,
    trained again (one thread), give the stored losses and prev_token scores."""
    _, info = two_block
    plain = json.loads(PLAIN_CURVE.read_text())
    for stored, again in ((_shipped_curve(info), plateau_curve(3.0, 3.0, steps=50, log_every=25)),
                          (plain, plateau_curve(1.0, 0.0, steps=50, log_every=plain["log_every"]))):
        n = len(again["step"])
        assert n >= 3 and stored["step"][:n] == again["step"]
        for key in ("loss_later_copies", "prev_token_block1"):
            assert again[key] == pytest.approx(stored[key][:n], abs=2e-3), key


def test_readme_item_5_path_patching_beside_the_score_split(causal_resample):
    """README item 5: under resample the most needed query path into block 2 is the previous-token
    head's (1.4), and the key side needs the head that looks two back (1.2) as well as 1.4."""
    from core.causal import readings

    q = _into_block2(causal_resample, "q", "noising")
    assert q["patch_effect"].idxmin() == "1.4"
    k = _into_block2(causal_resample, "k", "noising")
    assert (k.loc[["1.2", "1.4"], "effect_high"] < readings.NEEDED).all()
    top = causal_resample.offsets[causal_resample.offsets["top"]].set_index("sender")
    assert top.loc["1.2", "offset"] == 2 and top.loc["1.4", "offset"] == 1


if __name__ == "__main__":
    PLAIN_CURVE.parent.mkdir(exist_ok=True)
    PLAIN_CURVE.write_text(json.dumps(plateau_curve(1.0, 0.0), indent=None) + "\n")
    print(f"wrote {PLAIN_CURVE}")


def test_design_regeneration_paragraph_gives_the_shipped_figures():
    """docs/DESIGN.md "Presets ... and shipped checkpoints" (the shipped files): "2 blocks: later
    copies 0.126 nats at accuracy 0.979, a block-1 previous-token head at 0.965, four block-2 induction heads;
    1 block: 3.63 nats", "225 at the default seed", "drop at steps 100-260, median 165"."""
    from core.training.transition import load_study, summarize

    entries = {e["preset"]: e for e in json.loads((CKPT / "manifest.json").read_text())["checkpoints"]}
    two, one = entries["variable-period-2block"]["metrics"], entries["variable-period-1block"]["metrics"]
    text = " ".join((ROOT / "docs" / "DESIGN.md").read_text().split())
    assert (f"later copies {two['loss_later_copies']:.3f} nats at accuracy {two['acc_later_copies']:.3f}, a block-1 "
            f"previous-token head at {max(two['prev_token'][0]):.3f}, four block-2 induction heads; 1 block: "
            f"{one['loss_later_copies']:.2f} nats") in text
    model, info = _shipped("variable-period-2block")
    from core.training.live import drop_step

    assert drop_step(info["history"], model.cfg.vocab_size) == 225 and "(225 at the default seed;" in text
    s = summarize(load_study()).set_index("blocks")
    assert (f"drop at steps {s.loc[2, 'drop_step_min']:.0f}-{s.loc[2, 'drop_step_max']:.0f}, median "
            f"{s.loc[2, 'drop_step_median']:.0f}") in text


# ---- The Causal page's circuit tools say only what the shipped file shows ----------------

def test_attribution_is_poorest_through_m_itself_not_only_through_attention(causal_first_copy):
    """Causal page, section 3 (readings.first_order_sentence): "1.1 and 1.3 act on block 2 only through its
    values ... and still the estimate is 1.96 for 1.1, 1.82 for 1.3 times their exact sum". Measured: their
    query and key paths into block 2, noised or denoised, move M by at most 0.012 of the gap, while their value
    paths carry it (noising leaves 0.74 and 0.83), and plain attribution overestimates them about twice."""
    from core.causal import readings

    fc = causal_first_copy
    p = fc.paths[fc.paths["receiver_head"] < 0].set_index(["path", "direction", "sender"])["patch_effect"]
    for h in ("1.1", "1.3"):
        qk = [abs(1 - p[(x, "noising", h)]) for x in "qk"] + [abs(p[(x, "denoising", h)]) for x in "qk"]
        assert max(qk) < 0.02 and p[("v", "noising", h)] < 0.9
    sums = fc.attribution["sums"].set_index("label")
    assert sums.loc["1.1", "scale"] == pytest.approx(1.96, abs=0.01)
    assert sums.loc["1.3", "scale"] == pytest.approx(1.82, abs=0.01)
    said = readings.first_order_sentence(fc)
    assert "1.1 and 1.3 act on block 2 only through its values" in said
    assert "1.96 for 1.1, 1.82 for 1.3 times their exact sum" in said and "M's own log-softmax" in said
    assert "the last block's heads, with no attention after them at all, get 1.16 to 1.30 times theirs" in said


def test_atp_star_names_the_labs_extension_and_its_figures_at_the_defaults(causal_first_copy):
    """Causal page, section 3 (readings.atp_star_sentence): the recomputed later-block attention for an
    upstream head is the lab's extension of Kramár et al.'s QK fix, and the figures come with their settings:
    1.4 at period 24, 32 sequences, first-copy: exact -0.194, plain +0.210, AtP* +0.350."""
    from core.causal import readings

    s = causal_first_copy.attribution["sums"].set_index("label").loc["1.4"]
    assert (s.exact_sum, s.estimate_sum, s.star_sum) == pytest.approx((-0.194, 0.210, 0.350), abs=0.001)
    said = readings.atp_star_sentence(causal_first_copy)
    assert "the extension is the lab's, not the paper's" in said
    assert ("on the 32 sequences of period 24, first-copy corruption: " in said
            and "1.4 exact -0.194, plain +0.210, AtP* +0.350" in said)
    assert "ΔA·ΔV" in said


def test_graddrops_score_ranks_and_estimates_no_column_beside_it(two_block):
    """Causal page, GradDrop's table: its column is a ranking score, not the magnitude of the exact cells. For a
    block-2 head it is exactly 2|AtP*| (both dropped blocks leave its estimate alone): 2.1 scores 1.253 against
    exact cells of 0.481 in absolute value."""
    import numpy as np

    from core.causal import atp, patching

    model, info = two_block
    runs = patching.task_runs(model, info["task"], 32, 0, 24)
    exact = patching.head_position_effects(model, runs)
    star = atp.atp_star_head_positions(model, runs)
    t = atp.graddrop_table(model, runs, exact, star).set_index("label")
    for h in range(4):
        assert t.loc[f"2.{h + 1}", "graddrop"] == pytest.approx(2 * np.abs(star[1, h]).sum(), rel=1e-5)
    assert t.loc["2.1", "graddrop"] == pytest.approx(1.253, abs=0.001)
    assert t.loc["2.1", "abs_exact"] == pytest.approx(0.481, abs=0.001)


def test_the_circuit_chosen_and_scored_with_one_reference(causal_first_copy, causal_resample):
    """Causal page, "The circuit as a whole" (and docs/DESIGN.md), at period 24, 32 sequences, seed 0: chosen and
    scored with the mean over the corrupted runs, the circuit is 1.1 → v, 1.2 → k, 1.3 → v, 1.4 → q, 1.4 → k, 2.1
    and 2.2 under both corruptions, keeping 45% of the span under first-copy (41% under resample); greedy growth
    adds 1.1 → q (77%) and 2.4 (92%). With each sequence's own corrupted run as the one reference, the first-copy
    circuit drops the query path and keeps 48%; under resample no block-2 head is clearly needed alone there."""
    fc, rs = causal_first_copy.circuit, causal_resample.circuit
    same = ["1.1 → v", "1.2 → k", "1.3 → v", "1.4 → q", "1.4 → k", "2.1", "2.2"]
    assert fc["elements"] == same and rs["elements"] == same
    assert round(fc["recovered"], 2) == 0.45 and round(rs["recovered"], 2) == 0.41
    assert [(label, round(r, 2)) for label, r in fc["grown"]] == [("1.1 → q", 0.77), ("2.4", 0.92)]
    assert fc["other"]["elements"] == ["1.1 → v", "1.2 → k", "1.3 → v", "1.4 → k", "2.1"]
    assert round(fc["other"]["recovered"], 2) == 0.48
    assert not any(e.startswith("2.") for e in rs["other"]["elements"]) and rs["other"]["recovered"] == 0

