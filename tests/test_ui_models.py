"""The UI's view models, without widgets: conversation, latency statistics, status, settings."""
import pytest

from foresay.engine.events import (
    AudioChunk, BadEvent, DraftUpdated, FinalTranscript, Interrupt, LoadProgress, PartialTranscript, ReplyDone,
    ReplyHeard, SentenceReady, SpeechStarted, StatusMessage, TurnEnded, TurnMetrics,
)
from foresay.ui.conversation import LISTENING, SPEAKING, THINKING, USER_SPEAKING, ConversationModel, split_draft
from foresay.ui.errors import InvalidUiConfig
from foresay.ui.latency import BadMetrics, LatencyModel, percentile, stage_breakdown, summarize
from foresay.ui.main_window import WindowConfig
from foresay.ui.settings import SettingsChoices
from foresay.ui.status import StatusModel
from ui_support import finished_turn_events, metrics, mid_turn_events


def feed(model, events):
    for e in events:
        model.apply(e)
    return model


# --- conversation ----------------------------------------------------------------------------

def test_split_draft_uses_the_producers_split_when_given():
    e = DraftUpdated(1, 0.0, draft="A b c.", accepted_text="A ", rejected_text="x y.", new_text="b c.")
    assert split_draft("A x y.", e) == ("A ", "x y.", "b c.")


@pytest.mark.parametrize("old, new, expected", [
    ("The cat sat.", "The dog sat.", ("The ", "cat sat.", "dog sat.")),      # redrafted from a word
    ("The cat", "The cat sat on", ("The cat", "", " sat on")),               # pure extension
    ("The cat sat on", "The cat", ("The cat", " sat on", "")),               # truncated
    ("then go", "the dog", ("", "then go", "the dog")),                      # split inside the first word
    ("", "Hello.", ("", "", "Hello.")),
])
def test_split_draft_without_a_producer_split_keeps_whole_common_words(old, new, expected):
    assert split_draft(old, DraftUpdated(1, 0.0, draft=new)) == expected


def test_mid_turn_shows_the_live_partial_and_the_three_draft_parts():
    model = feed(ConversationModel(), mid_turn_events(turn=2))
    assert model.phase == USER_SPEAKING
    assert model.live_user_text == ("What's the weather like in", "Paris tomorrow")
    d = model.draft
    assert (d.accepted, d.rejected, d.new) == ("The weather ", "today is sunny and warm.", "in Paris tomorrow will be mild.")
    assert d.first_sentence == "The weather in Paris tomorrow will be mild."
    assert d.p_end_of_turn == pytest.approx(0.71)


def test_stale_revisions_and_older_turns_are_dropped():
    model = feed(ConversationModel(), mid_turn_events(turn=2))
    version = model.version
    assert not model.apply(PartialTranscript(2, 0.0, revision=1, committed="old"))
    assert not model.apply(DraftUpdated(2, 0.0, revision=1, draft="old draft"))
    assert not model.apply(PartialTranscript(1, 0.0, revision=9, committed="older turn"))
    assert model.version == version
    assert model.live_user_text[0] == "What's the weather like in"


def test_a_finished_turn_lands_in_the_history_and_the_draft_clears():
    model = feed(ConversationModel(), finished_turn_events(turn=1))
    assert [(t.role, t.text, t.outcome) for t in model.turns] == [
        ("user", "Hello there.", ""), ("assistant", "Hi! How can I help?", "accepted")]
    assert model.phase == LISTENING
    assert model.live_user_text == ("", "")
    assert model.draft.text == ""
    assert not model.apply(PartialTranscript(1, 20.0, revision=7, committed="late partial"))


def test_a_turn_that_heard_no_words_leaves_no_line_in_the_chat():
    model = feed(ConversationModel(), finished_turn_events(turn=1))
    feed(model, [SpeechStarted(2, 20.0), PartialTranscript(2, 20.3, revision=1, committed="", tentative="you"),
                 TurnEnded(2, 21.0, last_voiced_t=20.4), FinalTranscript(2, 21.1, text=""),
                 ReplyDone(2, 21.2, text="", outcome="empty")])
    assert [(t.role, t.turn_id) for t in model.turns] == [("user", 1), ("assistant", 1)]
    assert model.phase == LISTENING and model.live_user_text == ("", "")


def test_reply_grows_by_sentence_and_an_interrupt_marks_it():
    model = feed(ConversationModel(), [SpeechStarted(1, 0.0), TurnEnded(1, 1.0, last_voiced_t=0.8)])
    assert model.phase == THINKING
    model.apply(SentenceReady(1, 1.1, index=0, text="First one."))
    model.apply(AudioChunk(1, 1.2))
    assert model.phase == SPEAKING
    model.apply(SentenceReady(1, 1.3, index=1, text="Second one."))
    assert model.turns[-1].text == "First one. Second one." and not model.turns[-1].done
    model.apply(Interrupt(2, 1.5))
    model.apply(ReplyDone(1, 1.6, text="First one.", outcome="partial"))
    last = model.turns[-1]
    assert (last.text, last.interrupted, last.done, last.outcome) == ("First one.", True, True, "partial")


def test_the_header_says_listening_again_once_the_reply_has_played():
    """A reply complete as text before its audio plays (a speculated first sentence): the
    header said "speaking" until the user spoke again (seen in the window on a fresh machine)."""
    model = feed(ConversationModel(), finished_turn_events(turn=1))   # ReplyDone first
    assert model.phase == LISTENING
    model.apply(AudioChunk(1, 11.7))
    assert model.phase == SPEAKING
    model.apply(ReplyHeard(1, 13.0))
    assert model.phase == LISTENING
    model.apply(SpeechStarted(2, 14.0))
    model.apply(ReplyHeard(1, 14.1))   # a late report of the previous reply changes nothing
    assert model.phase == USER_SPEAKING


# --- latency -----------------------------------------------------------------------------------

def test_stage_breakdown_adds_up_to_voice_to_voice():
    stages = stage_breakdown(metrics(1, 620.0).values)
    assert stages == {"endpoint": 300.0, "asr": 80.0, "llm": 40.0, "tts": 50.0, "output": 150.0}
    assert sum(stages.values()) == 620.0


def test_stage_breakdown_leaves_unmeasured_stages_empty():
    stages = stage_breakdown({"endpoint_delay_ms": 200.0, "voice_to_voice_ms": 900.0})
    assert stages["endpoint"] == 200.0 and stages["llm"] is None and stages["output"] is None


def test_percentiles_interpolate():
    values = [float(v) for v in range(100, 1001, 100)]
    assert percentile(values, 50) == 550.0
    assert percentile(values, 90) == pytest.approx(910.0)
    assert summarize([]).median is None
    s = summarize([3.0, 1.0, 2.0])
    assert (s.count, s.median, s.p90) == (3, 2.0, pytest.approx(2.8))


def test_latency_model_counts_outcomes_underruns_and_keeps_history():
    model = feed(LatencyModel(), [metrics(1, 600.0, "accepted"), metrics(2, 800.0, "rejected", underruns=2),
                                  metrics(3, 1000.0, "partial", nfetfs=4, underruns=1)])
    assert model.turns == 3
    assert model.outcomes == {"accepted": 1, "partial": 1, "rejected": 1, "baseline": 0}
    assert model.underruns == 3
    assert model.summary("voice_to_voice_ms").median == 800.0
    assert model.summary("voice_to_voice_ms").p90 == pytest.approx(960.0)
    assert model.last["nfetfs"] == 4
    with pytest.raises(BadMetrics, match="no history"):
        model.summary("nonsense")


@pytest.mark.parametrize("values, match", [
    ({"voice_to_voice_ms": -5}, "voice_to_voice_ms"),
    ({"ttfs_ms": "fast"}, "ttfs_ms"),
    ({"outcome": "maybe"}, "outcome"),
])
def test_bad_metrics_are_refused_with_the_key_named(values, match):
    with pytest.raises(BadMetrics, match=match):
        LatencyModel().apply(TurnMetrics(1, 0.0, values=values))


def test_live_voice_to_voice_runs_until_the_first_chunk_then_the_measured_figure_replaces_it():
    now = [10.0]
    model = LatencyModel(clock=lambda: now[0])
    model.apply(TurnEnded(1, 9.9, last_voiced_t=9.5))
    assert model.live_voice_to_voice() == (pytest.approx(500.0), True)
    now[0] = 10.2
    assert model.live_voice_to_voice() == (pytest.approx(700.0), True)
    model.apply(AudioChunk(1, 10.25))
    now[0] = 11.0
    assert model.live_voice_to_voice() == (pytest.approx(750.0), False)
    model.apply(metrics(1, 812.0))
    assert model.live_voice_to_voice() == (812.0, False)


# --- status ------------------------------------------------------------------------------------

def test_status_tracks_loading_components_and_errors():
    status = StatusModel()
    status.apply(LoadProgress(0, 0.0, component="llm", label="qwen", done=25, total=100))
    status.apply(LoadProgress(0, 0.0, component="tts", label="espeak", done=3, total=4))
    assert status.overall_progress() == pytest.approx((0.25 + 0.75) / 2)
    status.apply(LoadProgress(0, 0.0, component="asr", done=1))
    assert status.overall_progress() is None  # one total unknown
    for component in ("llm", "tts"):
        status.apply(LoadProgress(0, 0.0, component=component, done=1, total=1))
    assert list(status.loading) == ["asr"]
    status.apply(StatusMessage(0, 0.0, text="No model for profile x", level="error"))
    assert (status.level, status.errors) == ("error", ["No model for profile x"])


def test_status_events_refuse_bad_values():
    with pytest.raises(BadEvent, match="level"):
        StatusMessage(0, 0.0, text="x", level="loud")
    with pytest.raises(BadEvent, match="done <= total"):
        LoadProgress(0, 0.0, component="llm", done=5, total=4)
    with pytest.raises(BadEvent, match="component"):
        LoadProgress(0, 0.0, done=1, total=2)


# --- settings and window config -----------------------------------------------------------------

def test_settings_choices_validate_and_spell_the_verifier():
    assert SettingsChoices(verifier="topk", k=5).verifier_spec == "topk:5"
    assert SettingsChoices().verifier_spec == "greedy"
    with pytest.raises(InvalidUiConfig, match="hangover_min_ms"):
        SettingsChoices(hangover_min_ms=900, hangover_max_ms=400)
    with pytest.raises(InvalidUiConfig, match="verifier"):
        SettingsChoices(verifier="psychic")
    with pytest.raises(InvalidUiConfig, match="shortcut"):
        SettingsChoices(ptt_shortcut="")


def test_window_config_caps_the_refresh_rate():
    with pytest.raises(InvalidUiConfig, match="refresh_hz"):
        WindowConfig(refresh_hz=60)
    with pytest.raises(InvalidUiConfig, match="mode"):
        WindowConfig(mode="telepathy")
