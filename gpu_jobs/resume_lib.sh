# Sourced by the collection scripts: start a run's output from a committed log, so it resumes there.
# Committed logs may be gzip-compressed (datasets/h200/*.txt.gz); a run appends plain text, so the copy is
# decompressed. The journal keeps the plain name: LOG.progress.jsonl.

# resume_copy LOG DEST: copy LOG.gz (decompressed) or LOG to DEST, and LOG.progress.jsonl to
# DEST.progress.jsonl. Nothing happens when DEST exists already (a run resumed in place) or LOG is absent.
resume_copy() {
  local log=${1%.gz} dest=$2
  [ -e "$dest" ] && return 0
  if [ -f "$log.gz" ]; then
    gzip -dc "$log.gz" > "$dest.part" && mv "$dest.part" "$dest" || { rm -f "$dest.part"; return 1; }
  elif [ -f "$log" ]; then
    cp "$log" "$dest"
  else
    return 0
  fi
  if [ -f "$log.progress.jsonl" ]; then cp "$log.progress.jsonl" "$dest.progress.jsonl"; fi
  return 0
}
