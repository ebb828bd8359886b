"""Models a user brings: a GGUF file, a base model with a supplied chat template, a template
without a system role."""
import json
import shutil

import pytest
import torch

from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.llm.gguf_export import export_gguf
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.sources import resolve_model_path, resolve_model_source
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import cold_greedy, drive_word_by_word, make_prompts

CONFIG = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2,
                       splitter=SplitterConfig(max_chars=40, min_cut_chars=10))
ASK = [{"role": "user", "content": "what is the capital of Japan?"}]


@pytest.fixture(scope="module")
def demo_gguf(tmp_path_factory):
    folder = resolve_model_path(LLMConfig(model="demo"))
    return export_gguf(folder, tmp_path_factory.mktemp("gguf") / "demo-chat.gguf")


def test_gguf_file_loads_with_tokenizer_template_and_same_logits(demo_gguf, load_fixture_lm):
    demo = load_fixture_lm("demo")
    lm = load_llm(LLMConfig(model=str(demo_gguf)))
    assert lm.tokenizer.chat_template == demo.tokenizer.chat_template
    ids = lm.encode(lm.render(ASK, True))
    assert ids == demo.encode(demo.render(ASK, True))
    assert lm.eos_ids == demo.eos_ids
    assert lm.dtype == torch.float32 and lm.max_context == demo.max_context
    with torch.inference_mode():
        torch.testing.assert_close(lm.model(torch.tensor([ids])).logits, demo.model(torch.tensor([ids])).logits)
    assert "qwen2, 1.44M parameters, float32 on cpu, context 2048 tokens" in lm.description
    # PredGen on the GGUF-loaded model is greedy-exact too
    for prompt in ["what is the capital of Japan?"]:
        turn = PredGenTurn(Conversation(lm), CONFIG)
        drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(lm, turn.prompt.ids, CONFIG.max_new_tokens)


def test_gguf_in_a_folder_is_chosen_by_name(demo_gguf):
    folder = str(demo_gguf.parent)
    with pytest.raises(ModelUnavailable, match="llm.gguf_file"):
        load_llm(LLMConfig(model=folder))
    assert resolve_model_source(LLMConfig(model=folder, gguf_file="demo-chat.gguf")) == (folder, "demo-chat.gguf")
    with pytest.raises(ModelUnavailable, match="has no file 'other.gguf'"):
        resolve_model_source(LLMConfig(model=folder, gguf_file="other.gguf"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_llm(LLMConfig(model=folder + "/missing.gguf"))
    with pytest.raises(ForesayError, match="not a .gguf file"):
        LLMConfig(model=folder, gguf_file="weights.bin")


def test_gguf_of_an_unsupported_architecture_says_so(tmp_path):
    import gguf
    import numpy as np
    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "foresay-odd")
    writer.add_block_count(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", "b"])
    writer.add_token_merges(["a b"])
    writer.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ForesayError, match="foresay-odd.*transformers reads GGUF files of these architectures: .*qwen2"):
        load_llm(LLMConfig(model=str(path)))


@pytest.fixture(scope="module")
def base_model(load_fixture_lm, tmp_path_factory):
    """The tiny-random fixture with its chat template removed: a base model."""
    load_fixture_lm("tiny-random")  # builds the fixture
    source = resolve_model_path(LLMConfig(model="tiny-random"))
    folder = tmp_path_factory.mktemp("base") / "base-model"
    shutil.copytree(source, folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


PLAIN_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}### User:\n{{ m['content'] }}\n"
                  "{% elif m['role'] == 'assistant' %}### Assistant:\n{{ m['content'] }}<|endoftext|>\n"
                  "{% endif %}{% endfor %}{% if add_generation_prompt %}### Assistant:\n{% endif %}")


def test_base_model_needs_and_takes_a_supplied_template(base_model, tmp_path):
    with pytest.raises(ForesayError, match="no chat template.*llm.chat_template"):
        load_llm(LLMConfig(model=str(base_model)))
    template = tmp_path / "plain.jinja"
    template.write_text(PLAIN_TEMPLATE)
    lm = load_llm(LLMConfig(model=str(base_model), chat_template=str(template)))
    # the template drops system messages: Foresay's system prompt goes into the first user message
    assert not lm.system_role
    conv = Conversation(lm, system_prompt="Be brief.")
    assert conv.prompt("hello there").text == "### User:\nBe brief.\n\nhello there\n### Assistant:\n"
    # the template's end of message ends a reply
    assert lm.tokenizer.convert_tokens_to_ids("<|endoftext|>") in lm.eos_ids
    for prompt in make_prompts(4, seed=5):
        turn = PredGenTurn(Conversation(lm), CONFIG)
        drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(lm, turn.prompt.ids, CONFIG.max_new_tokens), prompt
    inline = load_llm(LLMConfig(model=str(base_model), chat_template=PLAIN_TEMPLATE))
    assert inline.render(ASK, True) == lm.render(ASK, True)


def test_bad_templates_are_named(base_model, tmp_path):
    with pytest.raises(ForesayError, match="neither a file nor a Jinja template"):
        load_llm(LLMConfig(model=str(base_model), chat_template=str(tmp_path / "missing.jinja")))
    with pytest.raises(ForesayError, match="fails to render"):
        load_llm(LLMConfig(model=str(base_model), chat_template="{{ messages[5]['content'] }}"))
    with pytest.raises(ForesayError, match="does not show the messages' content"):
        load_llm(LLMConfig(model=str(base_model), chat_template="{{ 'hello' }}"))


def test_a_gguf_cut_after_its_header_is_a_clear_error(demo_gguf, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(demo_gguf.read_bytes()[:4096])   # a download cut short
    with pytest.raises(ModelUnavailable, match="cut.gguf: the file ends before .*download it again"):
        load_llm(LLMConfig(model=str(cut)))


def test_pickled_weights_torch_refuses_are_a_clear_error(base_model, tmp_path):
    folder = tmp_path / "pickled"
    shutil.copytree(base_model, folder)
    for name in ("model.safetensors", "model.safetensors.index.json"):
        (folder / name).unlink(missing_ok=True)
    torch.save({"weights": ForesayError("any object")}, folder / "pytorch_model.bin")   # weights_only refuses it
    with pytest.raises(ModelUnavailable, match="pickled pytorch_model.bin that torch refuses to load safely"):
        load_llm(LLMConfig(model=str(folder), chat_template=str(PLAIN_TEMPLATE)))
