"""``python -m playground.sample``: the command line; the CLI lives in playground/cli/sample.py, the library in
sampling.py. Kept so the documented command keeps working; import nothing from here.
"""

if __name__ == "__main__":
    from playground.settings import apply_process_defaults

    apply_process_defaults()  # before torch loads (settings.PROCESS_DEFAULTS)
    from playground.cli.sample import main

    raise SystemExit(main())
