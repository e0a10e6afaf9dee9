# Sourced by the collection scripts: start a run's output from a committed log, so it resumes there.
# Committed logs may be gzip-compressed (datasets/h200/*.txt.gz); a run appends plain text, so the copy is
# decompressed. The journal keeps the plain name: LOG.progress.jsonl.

# resume_copy LOG DEST: copy LOG to DEST (decompressed when LOG ends in .gz), and the plain log's journal
# to DEST.progress.jsonl. The file named is used when it exists; otherwise its other form (LOG.gz for a
# plain LOG, the plain LOG for LOG.gz). Nothing happens when DEST exists already (a run resumed in place)
# or neither form exists.
resume_copy() {
  local named=$1 dest=$2 log=${1%.gz} src
  [ -e "$dest" ] && return 0
  if [ -f "$named" ]; then src=$named
  elif [ -f "$log.gz" ]; then src=$log.gz
  elif [ -f "$log" ]; then src=$log
  else return 0
  fi
  case "$src" in
    *.gz) gzip -dc "$src" > "$dest.part" && mv "$dest.part" "$dest" || { rm -f "$dest.part"; return 1; } ;;
    *) cp "$src" "$dest" ;;
  esac
  if [ -f "$log.progress.jsonl" ]; then cp "$log.progress.jsonl" "$dest.progress.jsonl"; fi
  return 0
}
