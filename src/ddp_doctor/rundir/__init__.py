"""The run directory: the files a rank (or a job under `ddp-doctor run`) leaves for its parent.

One package writes and reads them, below both live/ and jobwatch/, so the file names, the JSON
reading and the records are written down once:

    records.py   the typed records (Heartbeat, RankResult) both sides share, with a schema version
    layout.py    where each file is: rank-N.<kind> names, the environment that names the directory
    jsonfile.py  atomic writes; a JSON object read back, or None when torn or not an object
    writer.py    the rank side: heartbeat, result file (imported by every rank before torch)
    reader.py    the parent side: every rank's heartbeat, result, error file and stack
    logs.py      log tails and the exit codes torchrun's summary prints
    cluster.py   a multi-node check's cluster file: every rank's entry, gathered by rank 0
    owner.py     temp directories that name their maker, so the next doctor removes a SIGKILLed one's

Standard library only: every rank imports it before torch, and the parent never imports torch.
"""
