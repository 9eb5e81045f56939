"""A structured-output failure on the command line (issue 15): the validation errors and the start of the raw
reply are printed, the whole reply is saved in the run directory, and the structured-output setting is named."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli_runs import TOY, _main
from test_engine_support import named_scripted_model, toy_agent_reply

# what the 1.5B model behind llama.cpp's server answered at query-init: `query` as a list of strings
BAD_REPLY = json.dumps({"requirements": [{"requirement": f"rule {i}", "query": ["spreadsheet", f"formula {i}"]}
                                         for i in range(1, 4)]}) + "\n" + "padding " * 200


def test_a_structured_output_failure_shows_the_errors_and_the_reply_and_saves_it(tmp_path: Path, capsys) -> None:
    agent = named_scripted_model("faults-cli-agent", toy_agent_reply)
    optimizer = named_scripted_model("faults-cli-optimizer", lambda messages: BAD_REPLY)
    run_dir = tmp_path / "run"
    code = _main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rfsi",
                  "--update", "rfsu", "--epochs", "1", "--minibatch", "3", "--run-dir", str(run_dir),
                  "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "validation errors:" in err and "requirements.0.query" in err and "Input should be a valid string" in err
    assert 'start of the model\'s reply:\n  | {"requirements": [{"requirement": "rule 1", "query": ["spreadsheet"' in err
    assert "[...]" in err and err.count("padding") < 100  # only the start is shown
    saved = sorted((run_dir / "failed_replies").glob("*.txt"))
    assert len(saved) == 1 and saved[0].read_text() == BAD_REPLY
    assert f"is saved in {saved[0]}" in err and "--structured-output json_schema" in err
