"""Upstream sglang's own DeepSeek-V4 metadata code, run under the sync ledger beside the model.

A sglang tree (a release installed at set-up, a downloaded release, or a checkout) is imported
without its heavy package ``__init__``s (`loader`), its compiled code stood in at the call by
counted torch stand-ins (`standins`, `kernels`), and its backend driven on the model's pool and
batches (`world`, `sides`) through the same cells as the model (`cells`); `execute` compares
them, `report` prints the table and the verdict. The backend knows nothing of this package.
"""
