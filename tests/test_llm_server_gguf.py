"""The `openai` backend through a real llama.cpp server serving a real GGUF (Gemma-3-270M): its
chat template writes special tokens and a beginning-of-sequence token, its vocabulary has byte
pieces, and the server names the model by its file path.

llama-cpp-python sorts the whole 262k vocabulary in Python for every echoed position, so the
prompts here are a few tokens long."""
import re

import pytest

from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.fixtures import GEMMA_CHAT_TEMPLATE
from foresay.engine.llm.server import ServerError, check_echo
from foresay.engine.llm.server_http import Answer
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn

from server_support import llama_cpp_server

CONFIG = PredGenConfig(max_new_tokens=6, max_draft_tokens=6, margin_tokens=2)


@pytest.fixture(scope="module")
def served_gemma(registry_model, tmp_path_factory):
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed "
                        "(bash packaging/bootstrap.sh test installs it)")
    gguf = registry_model("gemma-3-270m-gguf") / "gemma-3-270m-q4_k_m.gguf"
    log = tmp_path_factory.mktemp("gemma-server") / "server.log"
    with llama_cpp_server(gguf, log, alias=None, n_ctx=256) as url:  # named by its path
        yield url, gguf


@pytest.fixture(scope="module")
def gemma_lm(served_gemma):
    url, _ = served_gemma
    # the file name, in other case: the server's name for it is the whole path
    lm = load_llm(LLMConfig(model="Gemma-3-270M-Q4_K_M", backend="openai", base_url=url,
                            chat_template=GEMMA_CHAT_TEMPLATE, timeout_s=120))
    lm.prefetch = CONFIG.max_new_tokens
    return lm


def test_the_served_model_is_found_by_its_file_name_and_gives_the_tokenizer(served_gemma, gemma_lm):
    _, gguf = served_gemma
    assert gemma_lm.client.model == str(gguf) and gemma_lm.client.server == "llama-cpp-python"
    assert gemma_lm.leads_with_bos(Conversation(gemma_lm, system_prompt="").prompt("hi").ids)


def test_greedy_predgen_through_the_server_equals_the_servers_greedy(gemma_lm):
    conv = Conversation(gemma_lm, system_prompt="")
    turn = PredGenTurn(conv, CONFIG)
    # a base model is unsure of most chat replies (near-ties flip with the server's batching);
    # counting on, it is sure at every step. A draft while the user speaks, then a verification:
    turn.update("1 2 3 4 5", 1)
    record = turn.finalize("1 2 3 4 5 6")
    turn.finish()
    reply_ids = turn.reply_ids()
    reference = gemma_lm.client.greedy_text(gemma_lm.prompt_text(list(turn.prompt.ids)), CONFIG.max_new_tokens)
    reply = gemma_lm.decode(reply_ids)
    assert reply and record.nfetfs >= 1
    if turn.draft and turn.draft[-1] in gemma_lm.eos_ids:
        assert reply == reference
    else:  # cut at max_new_tokens
        assert reference.startswith(reply)
    # the template's BOS went once: the server added it, the text left it out
    assert gemma_lm.server_adds_bos and not gemma_lm.prompt_text(list(turn.prompt.ids)).startswith("<bos>")


def test_a_differing_tokenization_names_the_first_differing_token(gemma_lm):
    tok = gemma_lm.tokenizer
    ids = tok.encode("<bos><start_of_turn>user\nhé 😀 ǅ", add_special_tokens=False)
    # llama-cpp-python: no BOS echoed, special tokens empty, lone bytes of a character dropped
    echoed = [tok.decode([i], skip_special_tokens=True).replace("\ufffd", "") for i in ids[1:]] + ["x"]
    same = Answer(echoed, [None] * len(echoed), [None] * len(echoed), True, True, len(ids))
    check_echo(gemma_lm, ids, 0, same)  # byte pieces and special tokens agree
    other = list(echoed)
    other[3] = " hé"  # echoed 3 is position 4: the BOS is not echoed
    local = re.escape(f"token {ids[4]} {tok.decode([ids[4]])!r}")
    with pytest.raises(ServerError, match=f"at position 4 the local tokenizer has {local} where the server has ' hé'"):
        check_echo(gemma_lm, ids, 0, Answer(other, same.token_logprobs, same.entries, True, True, len(ids)))
    with pytest.raises(ServerError, match=f"it read {len(ids) + 1} tokens where the local tokenizer has {len(ids)}"):
        check_echo(gemma_lm, ids, 0, Answer(echoed, same.token_logprobs, same.entries, True, True, len(ids) + 1))
