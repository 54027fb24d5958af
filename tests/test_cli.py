"""The command line: each command end to end, and one clear line with exit 2 on user errors."""

import json
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import write
from nnlm import evaluate, load_model, read_stream
from nnlm.cli import main


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_help_teaches(capsys):
    code = main(["--help"])
    out = capsys.readouterr().out
    assert code == 0
    for word in ("prepare", "ngram", "eval", "demo", "examples:", "</s> is predicted"):
        assert word in out


def test_prepare_train_eval_round_trip(tmp_path, capsys):
    code, out, _ = run(["prepare", "toy", tmp_path / "toy"], capsys)
    assert code == 0 and "train.txt: 4,000 lines" in out
    code, out, _ = run(["ngram", "train", tmp_path / "toy/train.txt", "--order", "2",
                        "--discount-fallback", "-o", tmp_path / "m"], capsys)
    assert code == 0
    code, out, _ = run(["eval", tmp_path / "m", tmp_path / "toy/test.txt", "--json"], capsys)
    assert code == 0
    got = json.loads(out)
    model = load_model(tmp_path / "m")
    want = evaluate(model, read_stream(tmp_path / "toy/test.txt", model.vocab))
    assert got["perplexity"] == pytest.approx(want.perplexity)
    assert got["tokens"] == 3314 and got["unk"] == 0


def test_prepare_text_splits_by_tokens_and_replaces_rare_words(tmp_path, capsys):
    lines = [f"w{i % 7} common w{i}" for i in range(100)]  # 300 tokens
    write(tmp_path / "in.txt", "\n".join(lines) + "\n")
    code, out, _ = run(["prepare", "text", tmp_path / "in.txt", tmp_path / "out",
                        "--unk-max-count", "1"], capsys)
    assert code == 0
    train = (tmp_path / "out/train.txt").read_text().splitlines()
    assert len(train) == 80 and train[10] == "w3 common <unk>"  # w10 is seen once in train


@pytest.mark.parametrize("argv_tail,message", [
    (["eval", "{m}", "{tmp}/missing.txt"], "missing.txt: no such file"),
    (["eval", "{m}", "{tmp}/empty.txt"], "empty.txt: file is empty"),
    (["eval", "{m}", "{tmp}/bad.txt"], "bad.txt:2: not valid UTF-8"),
    (["eval", "{tmp}/nomodel", "{tmp}/empty.txt"], "nomodel: no such model directory"),
    (["ngram", "train", "{tmp}/blank.txt", "-o", "{tmp}/x"], "blank.txt: no tokens"),
    (["prepare", "text", "{tmp}/bad.txt", "{tmp}/o", "--valid-fraction", "2"], "--valid-fraction"),
])
def test_user_errors_are_one_line_with_exit_2(tmp_path, capsys, argv_tail, message):
    write(tmp_path / "empty.txt", "")
    write(tmp_path / "blank.txt", "\n\n")
    write(tmp_path / "bad.txt", b"ok\nnot \xff ok\n")
    write(tmp_path / "t.txt", "a b\n")
    assert main(["ngram", "train", str(tmp_path / "t.txt"), "--method", "addk", "--order", "2",
                 "-o", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    argv = [a.format(tmp=tmp_path, m=tmp_path / "m") for a in argv_tail]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert err.startswith("nnlm: error: ") and err.count("\n") == 1 and message in err


def test_demo_runs_and_reports(tmp_path, capsys):
    code, out, _ = run(["demo", "--workdir", tmp_path / "demo", "--epochs", "1"], capsys)
    assert code == 0
    assert "a dog was running in a room" in out and "test perplexity" in out
    assert "nearest neighbours" in out and "sampled from the NPLM" in out
    assert (tmp_path / "demo/nplm/model.safetensors").exists()
    assert (tmp_path / "demo/kn3/config.json").exists()


def test_module_entry_point_and_no_torch_on_the_count_path():
    out = subprocess.run([sys.executable, "-m", "nnlm", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("nnlm ")
    code = ("import sys, nnlm, nnlm.cli, nnlm.ngram, nnlm.models; "
            "assert 'torch' not in sys.modules, 'importing nnlm pulled in torch'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ngram_commands_end_to_end(tmp_path, capsys):
    assert main(["prepare", "toy", str(tmp_path / "toy")]) == 0
    train, valid = tmp_path / "toy/train.txt", tmp_path / "toy/valid.txt"
    for argv in (["--method", "kn", "--order", "3", "--arpa", str(tmp_path / "kn3.arpa"),
                  "--discount-fallback"],
                 ["--method", "interpolated", "--valid", str(valid)],
                 ["--method", "class", "--classes", "6", "--order", "3"]):
        name = argv[1]
        assert main(["ngram", "train", str(train), "-o", str(tmp_path / name), *argv]) == 0
    assert (tmp_path / "class/classes.tsv").exists()
    capsys.readouterr()
    write(tmp_path / "s.txt", "a dog was running in a room\n\nthe zebra is walking\n")
    code, out, err = run(["score", tmp_path / "kn", tmp_path / "s.txt"], capsys)
    rows = out.splitlines()
    assert code == 0 and rows[0].startswith("log10_prob\ttokens\toov")
    # words + </s>; the blank line is not a sentence but keeps its row
    assert [r.split("\t")[1] for r in rows[1:]] == ["8", "0", "5"]
    assert rows[2].split("\t")[3] == "-"
    assert rows[3].split("\t")[2] == "1" and "2 sentences, 13 tokens" in err
    model = load_model(tmp_path / "kn")
    assert float(rows[1].split("\t")[0]) == pytest.approx(
        model.sentence_logprob("a dog was running in a room") / 2.302585092994046, abs=1e-5)
    code, out, _ = run(["score", tmp_path / "kn3.arpa", tmp_path / "s.txt", "--per-token"],
                       capsys)
    assert code == 0 and out.splitlines()[0].startswith("a\t-") and "Total:" in out
    # the clustering of one model is reusable by another
    code, _, _ = run(["ngram", "train", train, "--method", "class", "--order", "2",
                      "--clustering", tmp_path / "class/classes.tsv", "-o", tmp_path / "c2"],
                     capsys)
    assert code == 0
    code, _, _ = run(["ngram", "cluster", train, "--classes", "5", "-o", tmp_path / "c.tsv"],
                     capsys)
    assert code == 0 and len((tmp_path / "c.tsv").read_text().splitlines()) == len(model.vocab)


@pytest.mark.parametrize("argv,message", [
    (["ngram", "export-arpa", "{tmp}/class", "{tmp}/x.arpa"], "has no back-off form"),
    (["ngram", "train", "{train}", "-o", "{tmp}/x", "--method", "class", "--arpa", "{tmp}/y"],
     "--arpa needs --method kn"),
    (["ngram", "train", "{train}", "-o", "{tmp}/x", "--method", "interpolated"], "--valid"),
    (["ngram", "train", "{tmp}/tiny.txt", "-o", "{tmp}/x", "--order", "2"],
     "--discount-fallback"),
    (["score", "{tmp}/x.arpa"], "no such model directory"),
])
def test_ngram_user_errors(tmp_path, capsys, argv, message):
    main(["prepare", "toy", str(tmp_path / "toy")])
    train = tmp_path / "toy/train.txt"
    write(tmp_path / "tiny.txt", "a b\n")
    main(["ngram", "train", str(train), "-o", str(tmp_path / "class"), "--method", "class",
          "--classes", "4"])
    capsys.readouterr()
    code, _, err = run([a.format(tmp=tmp_path, train=train) for a in argv], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_a_bare_command_group_shows_its_help(capsys):
    """``nnlm`` and ``nnlm ngram`` alone answer with what they offer, not an error."""
    for argv, shows in (([], "COMMAND"), (["ngram"], "ACTION")):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: nnlm") and shows in out


def test_a_close_miss_gets_a_suggestion(capsys):
    assert main(["trian"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'train'?" in err and err.count("\n") == 1
    assert main(["train", "x", "--valid", "y", "--preset", "mpl1", "-o", "z"]) == 2
    assert "did you mean 'mlp1'?" in capsys.readouterr().err
    assert main(["xyzzy"]) == 2
    assert "choose from" in capsys.readouterr().err  # nothing close: the whole list


def test_every_command_teaches_its_use():
    """Every command's --help ends with examples, every option has a help text, and an
    option whose value has a default says it; each example parses as written."""
    import argparse
    import shlex

    from nnlm.cli.common import is_leaf, walk_parsers
    from nnlm.cli.main import build_parser

    parser = build_parser()
    for path, command in walk_parsers(parser, ["nnlm"]):
        if not is_leaf(command):
            continue
        name = " ".join(path)
        assert "examples:" in (command.epilog or ""), f"{name}: no examples"
        for action in command._actions:
            if not action.option_strings or "-h" in action.option_strings:
                continue
            flag = action.option_strings[-1]
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {flag}: no help"
            if action.default not in (None, False) and action.nargs != 0 and \
                    not isinstance(action, argparse._StoreTrueAction):
                assert "default" in action.help, f"{name} {flag}: its default is not said"
        for line in command.epilog.replace("\\\n", " ").split("\n")[1:]:
            line = line.split(" #")[0].strip()
            if not line.startswith("nnlm") and "| nnlm" not in line:
                continue  # a continuation line, or another tool's command
            argv = shlex.split(line.split("| ")[-1])[1:]
            try:
                parser.parse_args(argv)
            except SystemExit:
                raise AssertionError(f"{name}: the example '{line}' does not parse") from None


def test_score_json_is_one_object_per_input_line(tmp_path, capsys):
    import json

    assert main(["prepare", "toy", str(tmp_path / "toy"), "--train-sentences", "200"]) == 0
    assert main(["ngram", "train", str(tmp_path / "toy/train.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(tmp_path / "kn")]) == 0
    text = tmp_path / "s.txt"
    text.write_text("the cat sees a dog\n\nzebra quokka\n")
    capsys.readouterr()
    assert main(["score", str(tmp_path / "kn"), str(text), "--json", "--per-token"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["sentence"] for r in rows] == ["the cat sees a dog", "", "zebra quokka"]
    assert rows[1]["perplexity"] is None and rows[2]["oov"] == 2
    assert len(rows[0]["per_token"]) == 6 and rows[0]["per_token"][-1]["word"] == "</s>"
    assert abs(sum(t["log10_prob"] for t in rows[0]["per_token"]) - rows[0]["log10_prob"]) < 1e-9


def test_every_command_that_runs_a_network_takes_the_same_speed_flags(tmp_path, capsys):
    """eval, score, rescore, mix, generate and serve all take --bf16, --device and
    --threads; mix --bf16 really scores the network in bfloat16 (its valid perplexity
    moves a little, within the documented 0.01%-ish tolerance of a tiny network, and is
    not the float32 number bit for bit), and serve's loader sets the network to bf16."""
    import argparse

    from conftest import toy_world
    from nnlm.cli.main import build_parser
    from nnlm.serve.registry import load_models

    parser = build_parser()
    commands = {a.dest: a for a in parser._subparsers._group_actions}["command"].choices
    for name in ("eval", "score", "rescore", "mix", "generate", "serve"):
        flags = {o for act in commands[name]._actions for o in act.option_strings}
        assert {"--bf16", "--device", "--threads"} <= flags, name
    assert isinstance(commands["mix"], argparse.ArgumentParser)

    w = toy_world(tmp_path)
    valid = str(w / "toy/valid.txt")
    assert main(["mix", str(w / "nplm"), str(w / "kn3"), "--valid", valid, "--threads", "1",
                 "--bf16", "-o", str(tmp_path / "mix")]) == 0
    from nnlm.experiments.mixing import mix_models

    ppl = {bf16: mix_models([w / "nplm", w / "kn3"], valid, weights=[0.5, 0.5],
                            speed=argparse.Namespace(bf16=bf16, device="cpu", threads=1)
                            ).perplexity for bf16 in (False, True)}
    assert ppl[False] != ppl[True] and abs(ppl[True] / ppl[False] - 1) < 0.02, ppl
    assert main(["generate", str(w / "nplm"), "-n", "2", "--seed", "1", "--bf16"]) == 0
    served = load_models([str(w / "nplm")], 0.0, 1024, 1, bf16=True)
    assert all(lm.bf16 for lm in next(iter(served.values())).lm.neural_parts())


def test_eval_signs_what_made_its_number(tmp_path, capsys, monkeypatch):
    """eval's JSON (and its text) carries a signature in sacrebleu's manner: nnlm's version,
    the model's identity, the vocabulary's and the scored tokens' fingerprints, how it
    scored. The same tokens read from stdin sign the same, and so does the same estimate
    saved again; another estimate, or another text, signs differently."""
    import io
    import json

    from nnlm.base.version import __version__

    assert main(["prepare", "toy", str(tmp_path / "toy"), "--train-sentences", "200"]) == 0
    assert main(["ngram", "train", str(tmp_path / "toy/train.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(tmp_path / "kn")]) == 0
    valid = tmp_path / "toy/valid.txt"

    def signed(model, text, stdin=None):
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsys.readouterr()
        assert main(["eval", str(model), str(text), "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    first = signed(tmp_path / "kn", valid)
    assert first["signature"].startswith(f"nnlm:{__version__}|model:kn:")
    assert f"tokens:{first['tokens']}|scoring:fp32" in first["signature"]
    assert signed(tmp_path / "kn", "-", valid.read_bytes())["signature"] == first["signature"]
    other_text = signed(tmp_path / "kn", tmp_path / "toy/test.txt")
    assert other_text["text_fingerprint"] != first["text_fingerprint"]
    assert main(["ngram", "train", str(tmp_path / "toy/train.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(tmp_path / "kn")]) == 0  # saved again
    same = signed(tmp_path / "kn", valid)  # the same estimate: the same identity
    assert same["signature"] == first["signature"]
    assert main(["ngram", "train", str(tmp_path / "toy/test.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(tmp_path / "kn")]) == 0  # another one
    again = signed(tmp_path / "kn", valid)
    assert again["model_identity"] != first["model_identity"]
    assert again["perplexity"] != first["perplexity"]
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "kn"), str(valid)]) == 0
    assert f"signature:   {again['signature']}" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_shell_completion_completes_commands_options_and_choices(tmp_path, capsys):
    """`nnlm completion bash`, loaded into a real bash, completes what --help names:
    commands, subcommands, options, fixed choices (and presets), files elsewhere."""
    import subprocess

    assert main(["completion", "bash"]) == 0
    script = tmp_path / "nnlm.bash"
    script.write_text(capsys.readouterr().out)
    (tmp_path / "corpus.txt").write_text("x\n")
    cases = {
        "nnlm tr": "train",
        "nnlm ngram co": "convert",
        "nnlm ngram train corpus.txt --met": "--method",
        "nnlm ngram train corpus.txt --method k": "kn",
        "nnlm train --preset dee": "deep",
        "nnlm eval --js": "--json",
        "nnlm mix --bf": "--bf16",
        "nnlm eval runs/kn5 corp": "corpus.txt",
    }
    program = [f"source {script}",
               't() { COMP_WORDS=($1); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=(); '
               '_nnlm; echo "${COMPREPLY[*]}"; }']
    program += [f"t {shlex.quote(line)}" for line in cases]
    done = subprocess.run(["bash", "-c", "\n".join(program)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(cases.values()), done.stdout
    assert main(["completion", "zsh"]) == 0
    assert "bashcompinit" in capsys.readouterr().out


# -- papercuts a new user met ---------------------------------------------------------------
@pytest.mark.parametrize("argv, meant", [
    (["eval", "m", "t.txt", "--bf1"], "--bf16"), (["ngram", "train", "t.txt", "--ord", "3",
                                                   "-o", "m"], "--order"),
    (["train", "t.txt", "--valid", "v.txt", "-o", "m", "--epoch", "2"], "--epochs")])
def test_an_option_is_never_taken_by_a_prefix_of_its_name(argv, meant, capsys):
    """argparse took --bf1 as --bf16 (and an n-gram model's signature then said bf16):
    a prefix is an unrecognized argument, and the option meant is suggested."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unrecognized arguments" in err[0] and meant in err[0]


def test_a_failed_prepare_leaves_no_folder_behind(tmp_path, monkeypatch, capsys):
    from nnlm.base.errors import NnlmError
    from nnlm.text import corpus

    def no_brown(**kw):  # as on a machine without Brown and offline
        raise NnlmError("the Brown corpus is not installed and could not be downloaded")

    monkeypatch.setattr(corpus, "prepare_brown", no_brown)
    assert main(["prepare", "brown", str(tmp_path / "data" / "brown")]) == 2
    assert not (tmp_path / "data").exists()
    assert main(["prepare", "toy", str(tmp_path / "data" / "toy")]) == 0
    assert sorted(p.name for p in (tmp_path / "data" / "toy").iterdir()) == [
        "test.txt", "train.txt", "valid.txt"]
    capsys.readouterr()


def test_models_say_what_they_are(tmp_path):
    import nnlm

    kn = nnlm.train(["a b c", "b a c"] * 5, order=3, discount_fallback=True,
                    output=tmp_path / "kn")
    assert repr(kn) == "<KneserNey kn: order 3, |V| = 6, n-grams 6 / 7 / 6>"
    assert repr(nnlm.load_model(tmp_path / "kn")).endswith(f"from {tmp_path / 'kn'}>")
    net = nnlm.train(["a b c", "b a c"] * 5, ["a b"], preset="tiny", max_steps=1, threads=1)
    assert "parameters" in repr(net) and repr(net).startswith("<")
