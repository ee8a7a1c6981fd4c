"""What the attention backend consumes, below both the backend and the serving world (as
sglang's ``forward_batch_info`` and memory pools sit below its attention backends): forward
modes, the forward batch, and the request-to-token pool. Nothing here imports the backend or
the serving world."""
