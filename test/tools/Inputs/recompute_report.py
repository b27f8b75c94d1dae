"""Prints each --recompute mode's saved bytes per layer from the reports in
DIR and checks full against none (at least 4x less), selective and full on the
first layer only (block) between them; exits non-zero when a check fails."""
import json
import sys

mem = {m: json.load(open(f"{sys.argv[1]}/{m}.json"))["memory"] for m in ("none", "full", "selective", "block")}
for m, j in mem.items():
    layers = [f"layer {l['layer']} {l['bytes']}" for l in j["saved_by_layer"] if l["layer"] >= 0]
    print(f"{m}: " + ", ".join(layers))
saved = {m: j["saved_activations"] for m, j in mem.items()}
assert saved["full"] * 4 <= saved["none"], saved
assert saved["full"] < saved["selective"] < saved["none"], saved
assert saved["full"] < saved["block"] < saved["none"], saved
assert mem["full"]["cuda"]["arena"] < mem["none"]["cuda"]["arena"], mem
print(f"OK: full saves {saved['none'] / saved['full']:.1f}x less")
