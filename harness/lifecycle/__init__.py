"""A world of requests that arrive and finish: the serving world driven by a scheduler whose
batch changes from step to step, with the KV and SWA frees upstream makes on the device."""
