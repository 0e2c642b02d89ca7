# Renders the reStructuredText on stdin (UTF-8) to the HTML document on stdout with docutils'
# HTML writer, as IPython's /rstservice/render did: file insertion (include, the file options
# of raw and csv-table) and raw directives disabled, no configuration files read, no
# stylesheet. Errors (level 3) and worse stop the rendering instead of showing in the
# document; nothing lesser is reported either.
# Exit codes: 0 rendered, 2 the reST is invalid (the message on stderr), 3 no docutils.
import io
import re
import sys

try:
    import docutils.core
    import docutils.utils
except ImportError as e:
    sys.stderr.write("docutils is not available: %s" % e)
    sys.exit(3)

try:
    text = sys.stdin.buffer.read().decode("utf-8")
except UnicodeDecodeError as e:
    sys.stderr.write("the reST is not UTF-8: %s" % e)
    sys.exit(2)

settings = {
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "_disable_config": True,
    "halt_level": 3,
    "report_level": 5,
    "warning_stream": io.StringIO(),
    "traceback": True,
    "stylesheet_path": "",
    "stylesheet": "",
    "output_encoding": "utf-8",
}
try:
    html = docutils.core.publish_string(text.strip(), writer_name="html", settings_overrides=settings)
except docutils.utils.SystemMessage as e:
    sys.stderr.write(re.sub(r"^<string>:(\d+): \(\w+/\d\) ", r"line \1: ", str(e)))
    sys.exit(2)
except RecursionError:
    sys.stderr.write("the reST is nested too deeply")
    sys.exit(2)
except Exception as e:  # IPython answered any failure of docutils as invalid reST.
    sys.stderr.write("%s: %s" % (type(e).__name__, e))
    sys.exit(2)
sys.stdout.buffer.write(html)
