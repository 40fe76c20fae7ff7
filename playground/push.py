"""``python -m playground.push <run> <owner/name>``: publish a checkpoint to the Hub (hub.publish_checkpoint)."""

if __name__ == "__main__":  # the command line lives in cli/push.py
    from playground.cli.push import main

    raise SystemExit(main())
