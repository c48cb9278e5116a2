"""YAML read with each key of a mapping once: PyYAML keeps the last of two equal keys without a
word, so `max_samples: 100` followed further down by `max_samples: 5` would evaluate 5 docs a task.

    yaml.load(stream, Loader=UniqueKeyLoader)   # a duplicate key raises yaml.YAMLError

Every reader of a YAML file a person writes or edits (the training YAML, lighteval's eval YAML, a
checkpoint's `config.yaml`) loads with it, so its usual `yaml.YAMLError` handling names the key.
"""

from typing import Any

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a mapping holding a key twice, naming it and both lines."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` merges, which a key of its own may override
                key, line = self.construct_object(key_node), key_node.start_mark.line + 1
                if key in lines:
                    raise yaml.constructor.ConstructorError(
                        problem=f"the key {key!r} is written twice (lines {lines[key]} and {line}): keep one"
                    )
                lines[key] = line
        return super().construct_mapping(node, deep=deep)
