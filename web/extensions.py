"""Flask extensions, created unbound here and bound to an app in create_app (init_app), so
importing web/ creates no app, connects to nothing and reads no configuration."""
from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

login_manager = LoginManager()
login_manager.login_view = "auth.login"
login_manager.login_message = "Please sign in to see that page."
login_manager.session_protection = "strong"

csrf = CSRFProtect()
