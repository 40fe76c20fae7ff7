"""Attention Playground: the core library behind the web app.

The core (everything except ``playground.ui``) knows nothing about
Gradio or Plotly, so it can be used from a notebook, a CLI or a test.
"""

__version__ = "0.1.0"
