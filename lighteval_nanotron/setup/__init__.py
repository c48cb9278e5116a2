"""The one setup path of both ways in, the training hook and `eval`: the tokenizer, the model
name, the steps already evaluated, the tasks, the engine and its settings, the pipeline and the
loggers, each built from the same `EvaluationOptions`. The hook decides *when* and `eval` *which
checkpoints*; what is evaluated, and how, is set up here. `setup.step` is the one step path of
every way in (the hook, `eval`, `evaluate()`): fingerprint, identity check, run, record, signal,
log, failed tasks."""
