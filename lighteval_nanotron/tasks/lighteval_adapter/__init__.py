"""lighteval's own task objects (lighteval 0.11 to 0.13) mapped onto this project's, at registry time.

The one place that imports lighteval (the optional extra `lighteval-nanotron[lighteval]`), and only
when a task file or a spec needs it:

- `installed`: the installed lighteval, its version checked (0.11 <= version < 0.14), and the few
  modules of it that are read;
- `task_files`: importing a task file written for any of those versions under the installed one
  (0.11's `suite=` under 0.12.1+), and one-line explanations for files of other versions (0.10's
  `metric=` is not read);
- `configs`: task configs and prompt functions (every lighteval field copied, adapted, ignored with
  a note, or refused by name);
- `metrics`: lighteval's metrics, computed by lighteval's own code on this project's model answers;
- `catalogue`: lighteval's catalogue of the installed version (0.11's and 0.12.0's suites; 0.12.1+'s suite-less
  tasks under the suite `lighteval`).

See docs/tasks.md, "Coming from lighteval".
"""

from lighteval_nanotron.tasks.lighteval_adapter.catalogue import CATALOGUE_SUITE, Catalogue, load_catalogue
from lighteval_nanotron.tasks.lighteval_adapter.configs import adapt_doc, adapt_task_config, inspect_only_fields
from lighteval_nanotron.tasks.lighteval_adapter.installed import (
    INSTALL_HINT,
    import_lighteval,
    installed_version,
    is_lighteval_object,
)
from lighteval_nanotron.tasks.lighteval_adapter.metrics import LightevalSampleFn, adapt_metric
from lighteval_nanotron.tasks.lighteval_adapter.task_files import explain_import_error, importing_task_file

__all__ = [
    "CATALOGUE_SUITE",
    "Catalogue",
    "INSTALL_HINT",
    "LightevalSampleFn",
    "adapt_doc",
    "adapt_metric",
    "adapt_task_config",
    "explain_import_error",
    "import_lighteval",
    "importing_task_file",
    "inspect_only_fields",
    "installed_version",
    "is_lighteval_object",
    "load_catalogue",
]
