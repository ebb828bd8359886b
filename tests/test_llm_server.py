"""The `openai` backend: PredGen over a real llama.cpp server, and a failing server's errors."""
import pytest
import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.gguf_export import export_gguf
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.sources import resolve_model_path
from foresay.engine.llm.server import ServerError, ServerLM
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn

from predgen_helpers import drive_word_by_word
from server_support import SERVED_NAME, llama_cpp_server, misbehaving_server

CONFIG = PredGenConfig(max_new_tokens=40, max_draft_tokens=24, margin_tokens=2)
REQUESTS = ["what is the capital of Japan?", "set a timer for 5 minutes", "what is 7 plus 5",
            "what currency do they use in Mexico"]


def server_config(url, **kw):
    return LLMConfig(model=SERVED_NAME, backend="openai", base_url=url, tokenizer="demo", **kw)


@pytest.fixture(scope="module")
def served_demo(tmp_path_factory):
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed "
                        "(bash packaging/bootstrap.sh test installs it)")
    root = tmp_path_factory.mktemp("llama-server")
    folder = resolve_model_path(LLMConfig(model="demo"))
    gguf = export_gguf(folder, root / "demo-chat.gguf")
    with llama_cpp_server(gguf, root / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def server_lm(served_demo):
    return load_llm(server_config(served_demo))


def test_greedy_predgen_through_the_server_equals_the_servers_greedy(server_lm):
    assert isinstance(server_lm, ServerLM) and server_lm.client.server == "llama-cpp-python"
    conv = Conversation(server_lm)
    kept = 0
    for text in REQUESTS:
        turn = PredGenTurn(conv, CONFIG)
        record = drive_word_by_word(turn, text)
        turn.finish()
        reply = server_lm.decode(turn.reply_ids())
        reference = server_lm.client.greedy_text(turn.prompt.text, CONFIG.max_new_tokens)
        if turn.draft and turn.draft[-1] in server_lm.eos_ids:
            assert reply == reference, text
        else:  # cut at max_new_tokens: the reference may run a little further
            assert reference.startswith(reply), text
        assert reply and record.nfetfs >= 1
        kept += sum(u.accepted for u in record.updates if u.verified)
        turn.commit()  # the next request has this one as history: the server's prefix cache
    assert kept > 0  # drafts survived verifications through the server: PredGen really speculated


def test_verification_rows_agree_with_the_in_process_model(server_lm, load_fixture_lm):
    demo = load_fixture_lm("demo")
    prompt = Conversation(demo).prompt("what is the capital of Japan?")
    ids = list(prompt.ids)
    with torch.inference_mode():
        local = demo.model(torch.tensor([ids])).logits[0].float()
    cache = server_lm.kv_cache()
    rows = cache.append(ids)
    assert cache.tokens == ids
    # every row's argmax is the local model's (GGUF float32 of the same weights)
    assert rows[1:].argmax(-1).tolist() == local[1:].argmax(-1).tolist()
    eom = prompt.end_of_message
    served = torch.softmax(rows[eom - 1], -1)[ids[eom]].item()
    own = torch.softmax(local[eom - 1], -1)[ids[eom]].item()
    assert served == pytest.approx(own, abs=0.02) or own < 0.5 > served  # exact when it is the top token
    passes = server_lm.stats.passes
    cache.crop(len(ids) - 3)  # the same tokens again: their rows are known, no round trip
    again = cache.append(ids[-3:], keep_logits=1)
    assert server_lm.stats.passes == passes and torch.equal(again[0], rows[-1])
    cache.crop(len(ids) - 3)  # other tokens: one round trip, rows from the server's prefix cache
    other = cache.append(server_lm.encode(" in Spain?"))
    assert server_lm.stats.passes == passes + 1 and other.shape[0] == len(server_lm.encode(" in Spain?"))


def test_decode_steps_come_from_the_prefetched_continuation(server_lm):
    cache = server_lm.kv_cache()
    ids = Conversation(server_lm).prompt("set a timer for 5 minutes").ids
    rows = cache.append(list(ids), keep_logits=1)
    passes = server_lm.stats.passes
    token = int(rows[-1].argmax())
    for _ in range(4):
        token = int(cache.append([token], keep_logits=1)[-1].argmax())
    assert server_lm.stats.passes - passes <= 1  # one round trip for several greedy steps


@pytest.mark.parametrize("mode,message", [("500", "answered 500"), ("drop", "dropped the connection"),
                                          ("slow", "did not answer within 1 s")])
def test_a_failing_server_gives_a_clear_error(mode, message):
    with misbehaving_server(mode) as url:
        lm = load_llm(server_config(url, timeout_s=1.0))
        with pytest.raises(ServerError, match=message):  # the history's prefill is the first request
            PredGenTurn(Conversation(lm), CONFIG)
        with pytest.raises(ServerError, match=message):
            PredGenTurn(Conversation(lm, system_prompt=""), CONFIG).update("what is the capital", 1)
        assert isinstance(ServerError("x"), ForesayError)


def test_server_settings_are_checked(monkeypatch):
    with pytest.raises(ForesayError, match="needs base_url"):
        LLMConfig(model="m", backend="openai")
    with pytest.raises(ForesayError, match="backend 'vllm' is not one of"):
        LLMConfig(model="m", backend="vllm")
    monkeypatch.delenv("FORESAY_TEST_KEY", raising=False)
    with pytest.raises(ForesayError, match="FORESAY_TEST_KEY, which is not set"):
        load_llm(server_config("http://127.0.0.1:9/v1", api_key_env="FORESAY_TEST_KEY"))
    with pytest.raises(ServerError, match="cannot be reached"):
        load_llm(server_config(f"http://127.0.0.1:{_closed_port()}/v1"))
    with misbehaving_server("500", models=(SERVED_NAME, "/models/Other-Chat.gguf")) as url:
        with pytest.raises(ForesayError, match="does not serve 'third'.*demo-chat, /models/Other-Chat.gguf"):
            load_llm(LLMConfig(model="third", backend="openai", base_url=url, tokenizer="demo"))
        # a name matches loosely: the file name, without folder, .gguf ending or case
        lm = load_llm(LLMConfig(model="other-chat", backend="openai", base_url=url, tokenizer="demo"))
        assert lm.client.model == "/models/Other-Chat.gguf"


def test_a_server_with_one_model_serves_it_whatever_its_name(caplog):
    with misbehaving_server("500") as url:
        lm = load_llm(LLMConfig(model="my-chat", backend="openai", base_url=url, tokenizer="demo"))
    assert lm.client.model == SERVED_NAME and lm.name == SERVED_NAME
    assert "serves one model, 'demo-chat'; using it for llm.model 'my-chat'" in caplog.text


def _closed_port():
    from server_support import free_port
    return free_port()
