import base64, json, sys
src = sys.argv[1]
data = open(src, "rb").read()
data += b"\x00" * (3 - len(data) % 3)   # as torch's _format_viz pads
files = json.dumps([{"name": src.split("/")[-1], "base64": base64.b64encode(data).decode()}])
for i, kind in enumerate(["Active Memory Timeline", "Allocator State History", "Active Cached Segment Timeline"]):
    page = f"""<!DOCTYPE html>
<html><head><script src="d3.v5.min.js"></script></head><body>
<script type="module">
import {{add_local_files}} from "./MemoryViz_local.js"
window.onerror = (m) => document.title = "ERROR " + m;
try {{ add_local_files({files}, {kind!r}); document.title = document.title || "ok"; }}
catch (e) {{ document.title = "ERROR " + e; }}
</script></body></html>
"""
    open(f"page{i}.html", "w").write(page)
