"""``python -m playground.train``: the command line; the CLI lives in playground/cli/train.py, the loop in
playground/training/. Kept so the documented command keeps working; import nothing from here.
"""

if __name__ == "__main__":
    from playground.settings import apply_process_defaults, training_defaults

    apply_process_defaults(training_defaults())  # before torch loads (settings.training_defaults)
    from playground.cli.train import main

    raise SystemExit(main())
