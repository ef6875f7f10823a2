// `vramctl completion bash|zsh`: a completion script written from the same
// tables the parser reads (commands.h, command_line.h, output.h), so a new
// command, flag or output format is completed without editing this file.
#include <iostream>

#include "command_line.h"
#include "commands.h"

namespace vramctl {
namespace {

// Command flags whose value is a file (explain -f POD.json).
constexpr const char* kFileValueFlags[] = {"-f"};

struct Words {
  std::string commands;       // "nodes pods ..."
  std::string globals;        // "--server -s ... -o --output"
  std::string file_flags;     // "--token-file|--cacert|...|-f" (a case pattern)
  std::string value_flags;    // every flag, global or a command's, that takes a value (a case pattern)
  std::string formats;        // "table wide json"
};

void Append(std::string* list, const std::string& word, const char* sep) {
  if (!list->empty()) *list += sep;
  *list += word;
}

Words Collect() {
  Words w;
  for (const Command& c : Commands()) Append(&w.commands, c.name, " ");
  for (const GlobalFlag& f : GlobalFlags()) {
    Append(&w.globals, f.name, " ");
    if (f.short_name != nullptr) Append(&w.globals, f.short_name, " ");
    if (f.value == nullptr) continue;
    const bool file = std::string(f.value) == "FILE";
    for (const char* n : {f.name, f.short_name}) {
      if (n == nullptr) continue;
      Append(&w.value_flags, n, "|");
      if (file) Append(&w.file_flags, n, "|");
    }
  }
  for (const Command& c : Commands()) {
    for (const char* v : c.value_flags) {
      if (("|" + w.value_flags + "|").find(std::string("|") + v + "|") == std::string::npos) {
        Append(&w.value_flags, v, "|");
      }
    }
  }
  for (const char* f : kFileValueFlags) Append(&w.file_flags, f, "|");
  for (const char* f : kFormatNames) Append(&w.formats, f, " ");
  return w;
}

// The words offered after the command (and its subcommand, if any), as a
// shell `case` over $cmd that sets $words (bash) or $list (zsh).
std::string CommandCases(const char* var, bool zsh_array) {
  std::string out;
  for (const Command& c : Commands()) {
    std::string subs, flags;
    for (const char* s : c.subcommands) Append(&subs, s, " ");
    for (const char* f : c.flags) Append(&flags, f, " ");
    auto assign = [&](const std::string& v) {
      return std::string(var) + "=" + (zsh_array ? "(" + v + ")" : "\"" + v + "\"");
    };
    out += std::string("    ") + c.name + ") ";
    if (!subs.empty()) {
      out += "if [[ -z $sub ]]; then " + assign(subs) + "; else " + assign(flags) + "; fi ;;\n";
    } else {
      out += assign(flags) + " ;;\n";
    }
  }
  return out;
}

std::string Bash() {
  const Words w = Collect();
  return "# bash completion for vramctl and kubectl-vram (written by `vramctl completion bash`):\n"
         "#   source <(vramctl completion bash)\n"
         "_vramctl() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
         "  case $prev in\n"
         "    -o|--output) COMPREPLY=($(compgen -W \"" + w.formats + "\" -- \"$cur\")); return ;;\n"
         "    " + w.file_flags + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
         "    " + w.value_flags + ") COMPREPLY=(); return ;;\n"
         "  esac\n"
         "  local cmd= sub= i w words=\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    w=${COMP_WORDS[i]}\n"
         "    case $w in\n"
         "      --) COMPREPLY=(); return ;;\n"
         "      " + w.value_flags + ") ((i++)) ;;\n"
         "      -*) ;;\n"
         "      *) if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi ;;\n"
         "    esac\n"
         "  done\n"
         "  case $cmd in\n"
         "    '') words=\"" + w.commands + "\" ;;\n" +
         CommandCases("words", false) +
         "  esac\n"
         "  COMPREPLY=($(compgen -W \"$words " + w.globals + "\" -- \"$cur\"))\n"
         "}\n"
         "complete -o default -F _vramctl vramctl kubectl-vram\n";
}

std::string Zsh() {
  const Words w = Collect();
  return "#compdef vramctl kubectl-vram\n"
         "# zsh completion for vramctl and kubectl-vram (written by `vramctl completion zsh`):\n"
         "#   source <(vramctl completion zsh)      (after compinit)\n"
         "_vramctl() {\n"
         "  local prev=${words[CURRENT-1]}\n"
         "  case $prev in\n"
         "    -o|--output) compadd -- " + w.formats + "; return ;;\n"
         "    " + w.file_flags + ") _files; return ;;\n"
         "    " + w.value_flags + ") return ;;\n"
         "  esac\n"
         "  local cmd= sub= i w\n"
         "  local -a list\n"
         "  for ((i = 2; i < CURRENT; i++)); do\n"
         "    w=${words[i]}\n"
         "    case $w in\n"
         "      --) _files; return ;;\n"
         "      " + w.value_flags + ") ((i++)) ;;\n"
         "      -*) ;;\n"
         "      *) if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi ;;\n"
         "    esac\n"
         "  done\n"
         "  case $cmd in\n"
         "    '') list=(" + w.commands + ") ;;\n" +
         CommandCases("list", true) +
         "  esac\n"
         "  compadd -- $list " + w.globals + "\n"
         "}\n"
         "if [[ \"${funcstack[1]}\" == _vramctl ]]; then _vramctl \"$@\"; else compdef _vramctl vramctl kubectl-vram; fi\n";
}

}  // namespace

std::string CompletionScript(const std::string& shell) {
  if (shell == "bash") return Bash();
  if (shell == "zsh") return Zsh();
  return "";
}

int CompletionCommand(const Context& c, const std::vector<std::string>& args) {
  const std::string script = args.size() == 1 ? CompletionScript(args[0]) : "";
  if (script.empty()) return Fail("usage: " + c.program + " completion bash|zsh", 2);
  std::cout << script;
  return 0;
}

}  // namespace vramctl
