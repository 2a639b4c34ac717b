def add_html_subparser(sub):
    pass
