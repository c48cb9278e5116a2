"""lighteval's eval YAML and Nanotron's `lighteval:` training-config section, mapped onto our options:
one table for both (`fields`), the hook's section from Nanotron's (`nanotron_section`), and `eval
--lighteval-config-path` (`eval_config`). Read as plain data: no lighteval or Nanotron import.
"""
