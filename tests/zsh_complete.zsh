# zsh -f zsh_complete.zsh FPATH_DIR OUTFILE "command line": completes the line once (a real
# interactive zsh in a pseudo-terminal, compinit, zsh's own _git), writes the edited $BUFFER.
# Each step waits for the one before it to be done (a marker file), so a loaded machine only
# makes it slower: the line is typed only once compinit ran and the key is bound.
zmodload zsh/zpty || exit 3
await () { local i; for i in {1..1200}; do [[ -s $1 ]] && return 0; sleep 0.05; done; return 4 }
zpty z zsh -f -i
zpty -w z "fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; print ok > $2.compinit"
await $2.compinit || exit 4
zpty -w z "cap () { zle complete-word; print -r -- \"\$BUFFER\" > $2.tmp && mv $2.tmp $2; }; zle -N cap; bindkey '^T' cap; print ok > $2.bound"
await $2.bound || exit 4
zpty -w -n z "$3"$'\x14'
await $2
rc=$?
zpty -d z
exit $rc
