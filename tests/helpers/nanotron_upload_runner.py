"""Run Nanotron's `src/nanotron/eval/upload_to_wandb.py` unchanged on a local folder.

The script reads results through `s3fs.S3FileSystem` and looks its run up with `wandb.Api()`,
both network services. This runner stands in for those two only: `s3fs` becomes fsspec's local
filesystem (the script calls `ls` and `open`, which it has with the same signatures) and the
W&B API lists no existing run, so the script opens a new (offline) run. The script's own
reading of the results files runs as written.

    python nanotron_upload_runner.py <upload_to_wandb.py> <the script's arguments...>
"""

import runpy
import sys
import types

import fsspec
import wandb


class _LocalS3FileSystem:
    def __init__(self, *args, **kwargs) -> None:
        self._fs = fsspec.filesystem("file")

    def ls(self, path, detail=False, **kwargs):
        return self._fs.ls(path, detail=detail, **kwargs)

    def open(self, path, mode="rb", **kwargs):
        return self._fs.open(path, mode, **kwargs)


class _NoRunsApi:
    def runs(self, path, *args, **kwargs):
        return []


if __name__ == "__main__":
    sys.modules["s3fs"] = types.SimpleNamespace(S3FileSystem=_LocalS3FileSystem)
    wandb.Api = _NoRunsApi
    script, *arguments = sys.argv[1:]
    sys.argv = [script, *arguments]
    runpy.run_path(script, run_name="__main__")
