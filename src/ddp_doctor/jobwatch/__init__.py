"""`ddp-doctor run`: watch the user's own distributed job (a layer below commands/).

    config.WatchConfig (frozen, built by commands/run.py) -> supervise.watch() -> WatchOutcome
    -> results.build_report() -> Report

envplan decides what observability the job gets (as data); hook/sitecustomize.py runs inside the
job's Python processes; evidence reads what they leave in the run directory; stacks captures and
classifies Python stacks (py-spy, or the hook's faulthandler); hang judges a quiet job; balance
measures straggling; nvml samples the GPUs; gather joins the nodes of a multi-node job.
Nothing here imports argparse or torch.
"""
