"""The built-in progress bar (used without tqdm) and the silent one."""

import io

from opgraph.optim.progress import ProgressBar, progress_bar


def test_builtin_bar_draws_and_ends_with_a_newline():
    stream = io.StringIO()
    bar = ProgressBar(4, "epoch 1/1", stream, width=8)
    for _ in range(4):
        bar.set_postfix_str("loss 0.5")
        bar.update(1)
    bar.close()
    text = stream.getvalue()
    assert "\repoch 1/1 [########] 4/4" in text and "loss 0.5" in text
    assert text.endswith("\n")


def test_disabled_bar_writes_nothing():
    stream = io.StringIO()
    bar = progress_bar(3, "x", enabled=False, stream=stream)
    bar.update(3)
    bar.set_postfix_str("y", refresh=False)
    bar.close()
    assert stream.getvalue() == ""
