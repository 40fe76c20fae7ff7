"""The one store and loader: ``weights/<name>/`` (store.py), the resolver from a name, Hub id or folder
(loading.py), the Hub (hub.py), the layouts it reads and writes (GPT-2's in gpt2.py and export.py, nanoGPT's
in nanogpt.py).

Knows nothing about visitors (server/) or the UI; training/ and lens/ read models through it.
"""
