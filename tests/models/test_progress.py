"""weakspot.progress: one (what, done, total) convention and its printer."""

from weakspot.progress import phase_of, printer


def test_phase_ignores_a_status_note():
    assert phase_of("train m: epoch (loss 0.123)") == "train m: epoch"
    assert phase_of("examine") == "examine"


def test_printer_prints_start_every_tenth_and_end():
    lines = []
    cb = printer("stage", print_fn=lines.append)
    for i in range(1, 101):
        cb("examine", i, 100)
    assert len(lines) == 11 and lines[0].startswith("  stage: examine 1/100") and "100/100" in lines[-1]
    for e in range(1, 4):  # a new phase starts counting again; the status note does not start a phase
        cb(f"epoch (loss {1 / e:.3f})", e, 3)
    assert len(lines) == 14 and lines[-1].startswith("  stage: epoch (loss 0.333) 3/3")
