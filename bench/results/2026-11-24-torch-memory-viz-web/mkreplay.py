import base64, json, sys
# the Allocator State History page of each pickle, then a click on every event
# (the viewer replays the trace back to that event: simulate_memory)
for src in sys.argv[1:]:
    data = open(src, "rb").read()
    data += b"\x00" * (3 - len(data) % 3)
    files = json.dumps([{"name": src.split("/")[-1], "base64": base64.b64encode(data).decode()}])
    name = src.replace("/", "_").replace(".pickle", "")
    open(f"replay_{name}.html", "w").write(f"""<!DOCTYPE html>
<html><head><script src="d3.v5.min.js"></script></head><body>
<script type="module">
import {{add_local_files}} from "./MemoryViz_local.js"
let err = null;
window.onerror = (m) => {{ err = m; document.title = "ERROR " + m; }};
add_local_files({files}, "Allocator State History");
setTimeout(() => {{
  const pres = document.querySelectorAll("div > div > div > pre");
  let n = 0;
  for (const p of pres) {{
    try {{ p.dispatchEvent(new MouseEvent("mousedown", {{bubbles: true}})); n++; }}
    catch (e) {{ err = String(e); break; }}
  }}
  document.title = err ? "ERROR " + err : "replayed " + n;
}}, 500);
</script></body></html>
""")
