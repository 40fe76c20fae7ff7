"""``python -m playground.export``: a checkpoint -> Hugging Face's GPT-2 layout. The command line lives in
playground/cli/export.py, the export in playground/checkpoints/export.py; import nothing from here.
"""

if __name__ == "__main__":
    from playground.cli.export import main

    raise SystemExit(main())
