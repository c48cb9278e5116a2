from lighteval_nanotron.tasks import Doc, SamplingMethod


def test_get_golds_single_and_several_indices():
    doc = Doc(query="Q", choices=["a", "b", "c"], gold_index=1)
    assert doc.get_golds() == ["b"]
    doc = Doc(query="Q", choices=["a", "b", "c"], gold_index=[2, 0])
    assert doc.get_golds() == ["c", "a"]


def test_get_golds_flattens_a_choice_that_lists_aliases():
    doc = Doc(query="Q", choices=[["Paris", "paris, france"], "Lyon"], gold_index=[0, 1])
    assert doc.get_golds() == ["Paris", "paris, france", "Lyon"]


def test_doc_defaults_match_lighteval():
    doc = Doc(query="Q", choices=[], gold_index=0)
    assert (doc.id, doc.task_name, doc.fewshot_samples, doc.sampling_methods) == ("", "", [], [])
    assert (doc.generation_size, doc.stop_sequences, doc.use_logits, doc.num_samples) == (None, None, False, 1)
    assert SamplingMethod("LOGPROBS") is SamplingMethod.LOGPROBS
