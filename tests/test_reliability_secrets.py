"""Fault injection, issue 15 item 9: secrets given in a config never reach the disk.

Credentials inside a URL and API-key fields used to be written verbatim to ``config.yaml``,
``run_metadata.json``, ``.hydra/`` and ``router/metadata.json``; the OpenAI-compatible server had
no API-key option.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from common.redact import REDACTED, redact, redact_argv
from scale import serving
from tests.reliability_support import RUN_NAME, run_cli
from tests.support import needs_locomo


@needs_locomo
def test_a_run_writes_no_secret_anywhere(tmp_path):
    secrets = ("sk-LEAK-1", "pw-LEAK-2", "tok-LEAK-3")
    proc = run_cli(
        tmp_path,
        # The judge is off, so this backend is never built; the config still carries it.
        f"+judge.backend.api_key={secrets[0]}",
        f"+judge.backend.base_url='https://bob:{secrets[1]}@api.example.com/v1?token={secrets[2]}&x=1'",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / RUN_NAME
    files = [p for p in run.rglob("*") if p.is_file()]
    for path in files:
        blob = path.read_bytes()
        assert not any(s.encode() in blob for s in secrets), f"a secret reached {path}"
    for name in ("config.yaml", "run_metadata.json", ".hydra/config.yaml", ".hydra/overrides.yaml",
                 "router/metadata.json"):
        text = (run / name).read_text()
        assert REDACTED in text, name  # redacted, not dropped: the field is still visible
    assert "api.example.com/v1" in (run / "config.yaml").read_text()  # the rest of the URL stays


@needs_locomo
def test_a_sweep_writes_no_secret_into_hydras_multirun_yaml(tmp_path):
    proc = run_cli(tmp_path, "-m", "seed=0", "+judge.backend.api_key=sk-LEAK-4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert tmp_path / "runs" / "multirun.yaml" in written
    assert not [p for p in written if b"sk-LEAK-4" in p.read_bytes()]


def test_redaction_rules():
    cfg = {
        "backend": {
            "api_key": "a", "hf_token": "b", "client_secret": "c", "password": "d", "apiKey": "e",
            "api_key_env": "OPENAI_API_KEY", "max_tokens": 64, "token_budget": None,
            "base_url": "http://u:p@h:1/v1?api_key=z&model=m",
        },
        "list": ["redis://:pw@cache:6379/0", 3],
    }
    out = redact(cfg)["backend"]
    assert [out[k] for k in ("api_key", "hf_token", "client_secret", "password", "apiKey")] == [REDACTED] * 5
    assert out["api_key_env"] == "OPENAI_API_KEY" and out["max_tokens"] == 64 and out["token_budget"] is None
    assert out["base_url"] == f"http://{REDACTED}@h:1/v1?api_key={REDACTED}&model=m"
    assert redact(cfg)["list"] == [f"redis://{REDACTED}@cache:6379/0", 3]
    # Hydra's override_dirname joins the overrides with commas.
    dirname = "seed=0,+judge.backend.api_key=x,train=tiny"
    assert redact(dirname) == f"seed=0,+judge.backend.api_key={REDACTED},train=tiny"
    assert redact_argv(["train.py", "+backend.api_key=x", "backend.base_url=http://a:b@h", "seed=1"]) == [
        "train.py", f"+backend.api_key={REDACTED}", f"backend.base_url=http://{REDACTED}@h", "seed=1"
    ]


class _FakeServer:
    listening_address = "http://127.0.0.1:8081"

    def __init__(self, params):
        self.params = params


@pytest.mark.serving
def test_server_api_key_option(tmp_path, monkeypatch):
    import xllamacpp

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(xllamacpp, "Server", _FakeServer)
    assert serving.start_llamacpp_server(str(gguf), port=8081).params.api_keys == []
    assert serving.start_llamacpp_server(str(gguf), port=8081, api_key="k1").params.api_keys == ["k1"]
    # The command line takes the *name* of an environment variable, never the key itself.
    started = {}
    fake_start = lambda *a, **kw: started.update(kw) or _FakeServer(None)  # noqa: E731
    monkeypatch.setattr(serving, "start_llamacpp_server", fake_start)
    monkeypatch.setattr(serving.threading.Event, "wait", lambda self, timeout=None: True)
    monkeypatch.setattr(serving.signal, "signal", lambda *a: None)  # keep pytest's own SIGTERM handler
    monkeypatch.setenv("MY_SERVER_KEY", "k2")
    assert serving.main(["--model", str(gguf), "--api-key-env", "MY_SERVER_KEY"]) == 0
    assert started["api_key"] == "k2"
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(SystemExit):
        serving.main(["--model", str(gguf), "--api-key-env", "MY_SERVER_KEY"])


def test_local_server_passes_its_key_by_environment_and_clients_send_it(monkeypatch):
    seen = {}

    class _Proc:
        returncode = None
        stderr = None

        def __init__(self, cmd, **kwargs):
            seen["cmd"], seen["env"] = cmd, kwargs["env"]

        def poll(self):
            return None

    monkeypatch.setattr(subprocess, "Popen", _Proc)
    monkeypatch.setattr(serving, "wait_healthy", lambda *a, **k: None)
    server = serving.LocalLlamaServer("model.gguf", port=9, api_key="k3").start()
    assert "k3" not in " ".join(seen["cmd"]) and seen["cmd"][-2:] == ["--api-key-env", serving.SERVER_KEY_ENV]
    assert seen["env"][serving.SERVER_KEY_ENV] == "k3"
    assert server.backend()._headers["Authorization"] == "Bearer k3"
    assert sys.executable in seen["cmd"]


@needs_locomo
def test_an_offline_wandb_run_records_no_secret_from_the_command_line(tmp_path):
    """Issue 49, item 13: wandb saves the process arguments; a key given as an override leaked into .wandb."""
    pytest.importorskip("wandb")
    secret = "sk-LEAK-WANDB-5"
    proc = run_cli(tmp_path, "wandb.mode=offline", f"+judge.backend.api_key={secret}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / RUN_NAME
    written = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in written), "no offline wandb run was written"
    assert not [p for p in written if secret.encode() in p.read_bytes()]
    assert any(b"REDACTED" in p.read_bytes() for p in written if p.suffix == ".wandb")
