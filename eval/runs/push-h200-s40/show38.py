import json, glob, sys
d = json.load(open(glob.glob(sys.argv[1] + "/result-*.json")[0]))
print(d.get("error", "")[:300], d.get("timing_error", ""), {k: round(v["median_ms"], 3) for k, v in d.get("timing", {}).get("stats", {}).items()})
