"""`lighteval-nanotron train`: a Nanotron training with the evaluation hook (`run_train`), the checks
made before any process starts (`config_check`, `preflight`) and the training data loaders (`data`).
"""
