"""``python -m playground.convert``: nanoGPT's ckpt.pt -> a checkpoint folder. The command line lives in
playground/cli/convert.py, the conversion in playground/checkpoints/nanogpt.py; import nothing from here.
"""

if __name__ == "__main__":
    from playground.cli.convert import main

    raise SystemExit(main())
