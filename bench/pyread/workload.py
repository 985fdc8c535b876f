"""bench/pyread's target: SGLang-shaped batches of requests, held still
while pyread reads them from outside.

Usage: python workload.py N [N...]
Builds one ScheduleBatch of N requests for each N, prints one JSON line
{"batches": {"N": id(batch)}, "rids": {"N": [rid, ...]}}, then waits until
stdin closes. Req sets its attributes in __init__ as SGLang's Req does,
more than the 30 that CPython 3.11+ keep in values over the class's shared
keys: each request has a dict of its own there, as in a real server.
"""
import json
import sys
import uuid


class Req:
    def __init__(self, i):
        self.rid = uuid.uuid4().hex
        self.origin_input_text = f"prompt {i}"
        self.origin_input_ids = [1, 2, 3, i]
        self.output_ids = []
        self.fill_ids = []
        self.session_id = None
        self.input_embeds = None
        self.sampling_params = None
        self.custom_logit_processor = None
        self.return_hidden_states = False
        self.lora_path = None
        self.stream = False
        self.tokenizer = None
        self.finished_reason = None
        self.to_abort = False
        self.to_abort_message = None
        self.eos_token_ids = None
        self.vid = 0
        self.decoded_text = ""
        self.read_offset = None
        self.surr_offset = None
        self.prefix_indices = []
        self.extend_input_len = 0
        self.last_node = None
        self.last_host_node = None
        self.host_hit_length = 0
        self.is_chunked = 0
        self.is_retracted = False
        self.return_logprob = False
        self.logprob_start_len = 0
        self.top_logprobs_num = 0
        self.token_ids_logprob = None
        self.temp_scaled_logprobs = False
        self.top_p_normalized_logprobs = False
        self.input_token_logprobs = None
        self.input_top_logprobs_val = None
        self.output_token_logprobs_val = []
        self.hidden_states = []
        self.multimodal_inputs = None
        self.cached_tokens = 0
        self.already_computed = 0
        self.spec_verify_ct = 0
        self.spec_accepted_tokens = 0
        self.lora_id = None
        self.time_stats = None


class ScheduleBatch:
    def __init__(self, reqs):
        self.reqs = reqs
        self.forward_mode = 2


def main():
    sizes = [int(a) for a in sys.argv[1:]]
    batches = {n: ScheduleBatch([Req(i) for i in range(n)]) for n in sizes}
    print(json.dumps({"batches": {str(n): id(b) for n, b in batches.items()},
                      "rids": {str(n): [r.rid for r in b.reqs] for n, b in batches.items()}}), flush=True)
    sys.stdin.read()


main()
