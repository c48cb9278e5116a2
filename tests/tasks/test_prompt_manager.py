import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.tasks import Doc, PromptManager

SHOTS = [
    Doc(query="Q: 1+1?\nA:", choices=[" 2", " 3"], gold_index=0),
    Doc(query="Q: 2+2?\nA:", choices=[" 3", " 4"], gold_index=[1]),
]


def _doc(**kwargs):
    return Doc(query="Q: 3+3?\nA:", choices=[" 6", " 7"], gold_index=0, fewshot_samples=SHOTS, **kwargs)


def test_plain_text_joins_parts_with_blank_lines():
    assert PromptManager().prepare_prompt(_doc()) == "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA: 4\n\nQ: 3+3?\nA:"


def test_plain_text_with_system_prompt_and_instruction_shown_once():
    doc = Doc(
        query="Solve. 3+3 =",
        choices=["6"],
        gold_index=0,
        instruction="Solve.",
        fewshot_samples=[Doc(query="Solve. 1+1 =", choices=["2"], gold_index=0, instruction="Solve.")],
    )
    prompt = PromptManager(system_prompt="You are exact.").prepare_prompt(doc)
    assert prompt == "You are exact.\n\nSolve.\n\n1+1 = 2\n\n3+3 ="


def test_prompt_api_messages():
    messages = PromptManager(system_prompt="sys").prepare_prompt_api(_doc(instruction="Math: "))
    assert messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Math: Q: 1+1?\nA:"},
        {"role": "assistant", "content": " 2"},
        {"role": "user", "content": "Q: 2+2?\nA:"},
        {"role": "assistant", "content": " 4"},
        {"role": "user", "content": "Q: 3+3?\nA:"},
    ]
    assert PromptManager().prepare_prompt_api(Doc(query="hi", choices=["x"], gold_index=0, instruction="I: ")) == [
        {"role": "user", "content": "I: hi"}
    ]


def _chat_tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")), unk_token="[UNK]"
    )
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    return tokenizer


def test_chat_template_mode_uses_the_tokenizer():
    manager = PromptManager(use_chat_template=True, tokenizer=_chat_tokenizer(), system_prompt="sys")
    assert manager.prepare_prompt(_doc()) == (
        "<system>sys</s><user>Q: 1+1?\nA:</s><assistant> 2</s><user>Q: 2+2?\nA:</s><assistant> 4</s>"
        "<user>Q: 3+3?\nA:</s><assistant>"
    )


def test_chat_template_mode_needs_a_tokenizer():
    with pytest.raises(ConfigError, match="tokenizer"):
        PromptManager(use_chat_template=True).prepare_prompt(_doc())


def test_prompts_of_real_task_docs(toy_task):
    doc = toy_task("custom|toy_mc:train_fs|1").get_docs(max_samples=1)[0]
    prompt = PromptManager().prepare_prompt(doc)
    shot = doc.fewshot_samples[0]
    assert prompt == f"{shot.query} {shot.get_golds()[0].strip()}\n\n{doc.query}"


def test_chat_template_with_a_tokenizer_without_one_fails_at_setup():
    tokenizer = _chat_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="has none .*tokenizer"):
        PromptManager(use_chat_template=True, tokenizer=tokenizer)  # before any prompt is rendered
